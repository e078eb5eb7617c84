#!/usr/bin/env node
'use strict';
// `npm run build` (and `prepare`, so every `npm install`/`npm ci`): the sources compiled to CommonJS under dist/, one
// file per source file (no bundle, so that each command still loads only what it requires), by the same esbuild
// that tsx runs them with; and the workflow bundle a worker started from dist/ uses (some 2 s of webpack, once, rather
// than at every worker's start). No type check here: `npm run typecheck` (and `npm test`) does that.
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { ROOT, DIST, STAMP, sourceFiles } = require('./sources');

/** Dependencies of many small modules that dist/ gets as one file each (see below). */
const BUNDLED_DEPENDENCIES = ['zod'];

/**
 * zod's messages in English only: its bundle otherwise carries some fifty languages' (half of its 1 MB) that no command
 * uses and every command pays for (some 12 ms of its start). `z.locales` keeps `en`.
 */
const englishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.c?js$/ }, (args) => ({
      path: path.join(args.resolveDir, '..', 'locales', 'en.cjs'),
      namespace: 'english-only',
    }));
    build.onLoad({ filter: /.*/, namespace: 'english-only' }, (args) => ({
      contents: `module.exports = { en: require(${JSON.stringify(args.path)}).default };`,
      resolveDir: path.dirname(args.path),
      loader: 'js',
    }));
  },
};

async function build() {
  const started = Date.now();
  const entryPoints = sourceFiles();
  // A checkout without its sources (the Dockerfile's `npm ci`, before it copies them): nothing to build yet.
  if (entryPoints.length === 0) return;
  let esbuild;
  try {
    esbuild = require('esbuild');
  } catch {
    process.stderr.write('tablefate build: esbuild is not installed (it comes with tsx): the command line runs the sources through tsx\n');
    return;
  }
  // Built beside dist/ and then put in its place, so that a command started meanwhile sees the old build or none
  // (and runs the sources through tsx), never half of one.
  const tmp = `${DIST}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  esbuild.buildSync({
    entryPoints,
    outdir: tmp,
    outbase: ROOT,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    logLevel: 'warning',
  });
  // zod as one file where dist/'s code finds it first (dist/node_modules, by Node's own resolution): its hundred-odd
  // modules cost a command some 20 ms to load one by one, and every command that reads a request or a config loads it.
  // (Only dist/'s code requires zod, so there is still one copy of it in a process.)
  for (const name of BUNDLED_DEPENDENCIES) {
    const dir = path.join(tmp, 'node_modules', name);
    await esbuild.build({
      entryPoints: [require.resolve(name)],
      bundle: true,
      plugins: name === 'zod' ? [englishOnly] : [],
      outfile: path.join(dir, 'index.js'),
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      logLevel: 'warning',
    });
    const { version } = require(path.join(ROOT, 'node_modules', name, 'package.json'));
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version, main: 'index.js' }));
  }
  // The workflow bundle a worker run from dist/ starts from (worker/workflow-bundle.ts's BUILT_BUNDLE), made from the
  // same sources by the same bundler a worker would run: some seconds off each worker's start.
  execFileSync(
    process.execPath,
    ['--require', 'tsx/cjs', path.join(ROOT, 'worker', 'workflow-bundle.ts'), path.join(tmp, 'workflows.bundle.js')],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  // servers/cluster-config.ts finds Temporal's configuration at `__dirname/../deploy/temporal`.
  fs.symlinkSync(path.join('..', 'deploy'), path.join(tmp, 'deploy'), 'dir');
  fs.writeFileSync(path.join(tmp, path.basename(STAMP)), String(started));
  // The command line's code cache (bin/compile-cache.js), recorded in the build before it takes dist/'s place (a command,
  // or a test, that finds dist/ finds its cache): a build without it still runs.
  try {
    execFileSync(process.execPath, [path.join(__dirname, 'compile-cache.js'), 'record', tmp], { stdio: ['ignore', 'ignore', 'inherit'] });
  } catch (err) {
    process.stderr.write(`tablefate build: no code cache for the command line (${err && err.message ? err.message : err})\n`);
  }
  const old = `${DIST}.old-${process.pid}`;
  try {
    fs.renameSync(DIST, old);
  } catch {
    // no dist/ yet
  }
  try {
    fs.renameSync(tmp, DIST);
  } catch (err) {
    // Another build (a second `npm test` at the same time) put its own in place first: as new as this one.
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(STAMP)) throw err;
  }
  fs.rmSync(old, { recursive: true, force: true });
}

build().catch((err) => {
  process.stderr.write(`tablefate build: ${err && err.stack ? err.stack : err}\n`);
  process.exitCode = 1;
});
