'use strict';
// What bin/build.js compiles into dist/, and how bin/tablefate.js tells whether dist/ is older than it.
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');
/** The directories of the code the command line and the worker run (test/ and bench/ run through tsx, as before). */
const SOURCE_DIRS = ['domain', 'workflows', 'activities', 'catalog', 'storage', 'servers', 'worker', 'client', 'contract', 'config', 'cli'];
/** Written last by a build: the time (ms) the build began reading the sources. */
const STAMP = path.join(DIST, '.built');

/** Every .ts source file under SOURCE_DIRS, with its modification time (ms). */
function sourceFiles() {
  const files = [];
  const walk = (dir) => {
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(file);
    }
  };
  for (const dir of SOURCE_DIRS) walk(path.join(ROOT, dir));
  return files;
}

/** The build's start time, or undefined when there is no complete build. */
function builtAt() {
  try {
    return Number(fs.readFileSync(STAMP, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Whether dist/ holds a complete build at least as new as every source file (a stat per file: some 2 ms). */
function isFresh() {
  const at = builtAt();
  if (at === undefined || !Number.isFinite(at)) return false;
  for (const file of sourceFiles()) if (fs.statSync(file).mtimeMs > at) return false;
  return true;
}

module.exports = { ROOT, DIST, SOURCE_DIRS, STAMP, sourceFiles, isFresh };
