import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

/*
 * The command line's code cache (bin/compile-cache.js): a module runs from its cached data only while its file is the
 * one recorded; any change, even one that keeps its size, compiles it from its source.
 */
const CACHE_MODULE = path.resolve(__dirname, '..', 'bin', 'compile-cache.js');

/** Runs `code` in a node of its own with `cc` (the cache module), answering what it prints as JSON. */
function inNode(code: string): unknown {
  const out = execFileSync(process.execPath, ['-e', `const cc = require(${JSON.stringify(CACHE_MODULE)}); ${code}`], {
    env: { ...process.env, TABLEFATE_COMPILE_CACHE: '1' },
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-compile-cache-'));
  fs.writeFileSync(path.join(dir, 'a.js'), "module.exports = require('./b.js') + 1;\n");
  fs.writeFileSync(path.join(dir, 'b.js'), 'module.exports = 41;\n');
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const cache = () => path.join(dir, 'cache');
/** The files the manifest in the test's cache records, by their path under the test's directory. */
const recordedFiles = () =>
  (JSON.parse(fs.readFileSync(path.join(cache(), 'manifest.json'), 'utf8')) as { files: Record<string, unknown> }).files;
const recordA = () =>
  inNode(
    `cc.record({ cache: ${JSON.stringify(cache())}, root: ${JSON.stringify(dir)}, modules: [${JSON.stringify(path.join(dir, 'a.js'))}] }); console.log('{}')`,
  );
const loadA = () =>
  inNode(
    `const stats = cc.install({ cache: ${JSON.stringify(cache())}, root: ${JSON.stringify(dir)} }); const value = require(${JSON.stringify(path.join(dir, 'a.js'))}); console.log(JSON.stringify({ value, stats }))`,
  );

test('a recorded module runs from its cached data, and what it requires too', () => {
  recordA();
  expect(recordedFiles()).toHaveProperty(['b.js']);
  expect(loadA()).toEqual({ value: 42, stats: { fromCache: 2, compiled: 0 } });
});

test('a file changed since it was recorded compiles from its source, even at the same size', () => {
  recordA();
  const b = path.join(dir, 'b.js');
  fs.writeFileSync(b, 'module.exports = 51;\n');
  fs.utimesSync(b, new Date(), new Date(Date.now() + 5_000));
  expect(loadA()).toEqual({ value: 52, stats: { fromCache: 1, compiled: 1 } });
});

test('a module that uses import() is never cached, and still works', () => {
  const c = path.join(dir, 'c.js');
  fs.writeFileSync(c, "module.exports = { later: () => import('node:os') };\n");
  inNode(
    `cc.record({ cache: ${JSON.stringify(cache())}, root: ${JSON.stringify(dir)}, modules: [${JSON.stringify(c)}] }); console.log('{}')`,
  );
  expect(recordedFiles()).not.toHaveProperty(['c.js']);
  const answer = inNode(
    `cc.install({ cache: ${JSON.stringify(cache())}, root: ${JSON.stringify(dir)} }); require(${JSON.stringify(c)}).later().then((os) => console.log(JSON.stringify(typeof os.cpus)))`,
  );
  expect(answer).toBe('function');
});

test("the build records the command line's modules and the Temporal client, and a command's modules all run from it", () => {
  const { files } = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', 'dist', '.compile-cache', 'manifest.json'), 'utf8')) as {
    files: Record<string, unknown>;
  };
  expect(Object.keys(files)).toEqual(
    expect.arrayContaining(['dist/cli/main.js', 'dist/client/client.js', 'node_modules/@temporalio/proto/protos/json-module.js']),
  );
  const stats = inNode(
    `const stats = cc.install(); require('${path.resolve(__dirname, '..', 'dist', 'cli', 'main.js')}'); require(require.resolve('@temporalio/client', { paths: ['${path.resolve(__dirname, '..', 'dist')}'] })); console.log(JSON.stringify(stats))`,
  ) as { fromCache: number; compiled: number };
  expect(stats.compiled).toBe(0);
  expect(stats.fromCache).toBeGreaterThan(100);
});
