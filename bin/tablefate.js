#!/usr/bin/env node
'use strict';
// The command line runs the JavaScript that `npm install` (`prepare`) and `npm run build` put in dist/. When dist/
// is missing or older than a source file (an edit, a pull, since the last build), it runs the sources themselves
// through tsx, as before there was a build: slower to start (about 1.5 s), never stale. A person at a terminal is told
// so on stderr; scripts see the same output either way.
const path = require('node:path');
const { DIST, isFresh } = require('./sources');

let entry;
if (isFresh()) {
  entry = path.join(DIST, 'cli', 'main.js');
  require('./compile-cache').install();
} else {
  if (process.stderr.isTTY)
    process.stderr.write('tablefate: dist/ is missing or older than the sources: running them through tsx (npm run build)\n');
  require('tsx/cjs');
  entry = path.join(__dirname, '..', 'cli', 'main.ts');
}
const { main } = require(entry);

// A reader that stops reading (`tablefate contract | head`) ends the output, not the command with a stack trace: the
// rest is not wanted.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`tablefate: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  },
);
