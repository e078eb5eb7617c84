#!/bin/sh
# Run by the postgres image once, when it initialises an empty data volume (/docker-entrypoint-initdb.d), never
# again: a password changed later in .env must be changed in PostgreSQL too, by hand (ALTER ROLE ... PASSWORD).
#
# One login per user of the server, each with only what it needs:
#   temporal   may create databases: the schema setup (deploy/temporal/setup-schema.sh) makes `temporal` and
#              `temporal_visibility` as this login, so it owns them;
#   tablefate  owns the catalog database `tablefate`, where the worker creates and migrates its tables on start.
# The passwords arrive as psql variables (:'...' quotes them), so no shell or SQL quoting can go wrong here.
# No `set -eu`: the image sources a script that is not executable, and the options would outlive it. psql stops at
# the first error (ON_ERROR_STOP) and its status is the script's, which stops the initialisation.

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v temporal_password="$TEMPORAL_DB_PASSWORD" \
  -v tablefate_password="$TABLEFATE_DB_PASSWORD" <<'SQL'
CREATE ROLE temporal LOGIN CREATEDB PASSWORD :'temporal_password';
CREATE ROLE tablefate LOGIN PASSWORD :'tablefate_password';
CREATE DATABASE tablefate OWNER tablefate;
-- Only its owner (and the superuser) may connect to the catalog.
REVOKE ALL ON DATABASE tablefate FROM PUBLIC;
SQL
