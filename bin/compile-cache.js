'use strict';
// A V8 code cache for the modules a command of the command line loads (Node 22's module.enableCompileCache, which the
// Node 20 we run on lacks). V8 then skips parsing and compiling them: a command that talks to Temporal loads some 200
// modules (the Temporal client, gRPC, protobufjs, zod, ours), and compiling them took some 40 ms of each such command.
//
// `npm run build` records it into dist/.compile-cache/ (`node bin/compile-cache.js record <build>`, before the build
// takes dist/'s place, so that a dist/ is never without its cache): a process that requires the command line's modules
// and writes each one's cached data, with a manifest of each file's size and modification time. bin/tablefate.js installs it (`install()`) before it requires dist/: a module whose file
// is as recorded runs from its cached data; any other (a file changed since, a module never recorded, one that uses
// `import()`, which a script compiled here could not serve) compiles as ever, and so does every module where the Node
// that recorded the cache is not the one running (V8 would refuse its data anyway). TABLEFATE_COMPILE_CACHE=0 turns it
// off. The cache is only ever written by the build, never by a command.
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');
const Module = require('node:module');
const { ROOT, DIST } = require('./sources');

const CACHE = path.join(DIST, '.compile-cache');

/** The modules a command loads: every one the command line requires, whichever command it runs, short of a worker. */
const RECORDED = [
  'cli/main.js',
  'cli/commands.js',
  'cli/format.js',
  'client/index.js',
  'config/client.js',
  'catalog/open.js',
  'catalog/sqlite.js',
  'catalog/postgres.js',
  'contract/document.js',
  'cli/contract-text.js',
];

/** Whether a module may run from a script compiled here: one that uses `import()` may not (no loader is given it). */
const cacheable = (content) => !content.includes('import(');

/** Runs a module's compiled wrapper as Node's own loader does, with a `require` of the module's own. */
function run(module, script, filename) {
  const require = (id) => module.require(id);
  require.resolve = (request, options) => Module._resolveFilename(request, module, false, options);
  require.resolve.paths = (request) => Module._resolveLookupPaths(request, module);
  require.main = process.mainModule;
  require.extensions = Module._extensions;
  require.cache = Module._cache;
  const wrapper = script.runInThisContext({ displayErrors: true });
  return wrapper.call(module.exports, module.exports, require, module, filename, path.dirname(filename));
}

/**
 * Makes the modules recorded in `cache` (dist/.compile-cache) run from their cached data (see above). Answers how many
 * modules ran from it and how many compiled from their source, as they load.
 */
function install({ cache = CACHE, root = ROOT } = {}) {
  const stats = { fromCache: 0, compiled: 0 };
  if (process.env.TABLEFATE_COMPILE_CACHE === '0') return stats;
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(cache, 'manifest.json'), 'utf8'));
  } catch {
    return stats;
  }
  if (manifest.node !== process.version || manifest.arch !== process.arch) return stats;
  const compile = Module.prototype._compile;
  const fromSource = (module, content, filename) => {
    stats.compiled++;
    return compile.call(module, content, filename);
  };
  Module.prototype._compile = function compileFromCache(content, filename) {
    const entry = manifest.files[path.relative(root, filename)];
    // (Only cacheable modules are recorded, and one changed since differs in size or time: its content is not scanned.)
    if (!entry) return fromSource(this, content, filename);
    let cachedData;
    try {
      const stat = fs.statSync(filename);
      if (stat.size !== entry.size || stat.mtimeMs !== entry.mtimeMs) return fromSource(this, content, filename);
      cachedData = fs.readFileSync(path.join(cache, entry.data));
    } catch {
      return fromSource(this, content, filename);
    }
    const script = new vm.Script(Module.wrap(content), { filename, cachedData });
    // (Data V8 refuses, say after a change of flags, is dropped: the module compiled from its source.)
    if (script.cachedDataRejected) stats.compiled++;
    else stats.fromCache++;
    return run(this, script, filename);
  };
  return stats;
}

/**
 * Requires `modules` (and what they require), compiling each here, and writes into `cache` their cached data and the
 * manifest: the files under `root`, each with its size and modification time. `builtAt`: the build being made (the
 * directory that becomes dist/ once its cache is in it), whose files are recorded under their names in dist/.
 */
function record({ builtAt = DIST, cache = path.join(builtAt, '.compile-cache'), root = ROOT, modules = recordedModules(builtAt) } = {}) {
  const scripts = [];
  const compile = Module.prototype._compile;
  const asInDist = (filename) => (filename.startsWith(builtAt + path.sep) ? path.join(DIST, path.relative(builtAt, filename)) : filename);
  Module.prototype._compile = function compileToRecord(content, filename) {
    const script = new vm.Script(Module.wrap(content), { filename });
    const relative = path.relative(root, asInDist(filename));
    if (cacheable(content) && !relative.startsWith('..')) scripts.push({ filename, relative, script });
    return run(this, script, filename);
  };
  try {
    for (const file of modules) require(file);
  } finally {
    Module.prototype._compile = compile;
  }
  fs.rmSync(cache, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  const files = {};
  scripts.forEach(({ filename, relative, script }, i) => {
    const data = `${i}.bin`;
    fs.writeFileSync(path.join(cache, data), script.createCachedData());
    const { size, mtimeMs } = fs.statSync(filename);
    files[relative] = { data, size, mtimeMs };
  });
  fs.writeFileSync(path.join(cache, 'manifest.json'), JSON.stringify({ node: process.version, arch: process.arch, files }));
}

/** RECORDED in the build, and the client of Temporal, which the SDK loads only when a command first needs the server. */
function recordedModules(builtAt) {
  return [...RECORDED.map((file) => path.join(builtAt, file)), require.resolve('@temporalio/client', { paths: [builtAt] })];
}

module.exports = { install, record, CACHE };

if (require.main === module && process.argv[2] === 'record') record(process.argv[3] ? { builtAt: path.resolve(process.argv[3]) } : {});
