#!/usr/bin/env node
'use strict';
// The command line runs the TypeScript sources directly (through tsx), so there is no build step to forget.
require('tsx/cjs');
const { main } = require('../cli/main.ts');

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`tablefate: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  },
);
