# The tablefate worker and command line. The Temporal server runs in its own container (docker-compose.yml).
FROM node:20-bookworm-slim
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
COPY bin/build.js bin/sources.js ./bin/
# (Its `prepare` finds no sources yet and builds nothing: the build is the step after the sources.)
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
# The command line's JavaScript (dist/), which it runs instead of the sources through tsx.
RUN node bin/build.js
ENV TABLEFATE_HOME=/data
# A bounded V8 heap: Node's default lets a worker's heap grow lazily to memory it does not need (with 10,000
# trashes waiting a worker holds about 330 MB of RSS even without this; docs/performance.md). Override to taste.
ENV NODE_OPTIONS=--max-old-space-size=300
VOLUME /data
ENTRYPOINT ["node", "bin/tablefate.js"]
CMD ["worker"]
