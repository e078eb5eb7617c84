import { parseArgs } from 'node:util';
import type { TableInfo } from '../domain/table';
import type { TableFateClient } from '../client/client';
import { exitCodeOfError } from '../domain/error-meanings';
import { TableFateError } from '../domain/errors';
import { alternatives, COMMON, UsageError, type CommandSpec, type RunContext } from './command';
import { findCommand, usage } from './commands';
import type { CliIo } from './io';

export type { CliIo };

/*
 * The command line: finds the command in cli/commands.ts's table, parses its options and arguments, runs it and
 * prints what it returns. This file and the table load nothing heavy: each command requires what it needs when it
 * runs (the SDK for a table command, the worker for `worker`), so that `--help` answers at once and `ls` does not
 * load the worker. The SDK in turn loads Temporal's client (gRPC, the server's protobufs) only for a call that needs
 * the server (client/temporal.ts): `config get` and `lease ls` answer from the catalog without it.
 */

/* eslint-disable @typescript-eslint/no-require-imports -- lazy loading (a require: tsx's CommonJS hook, which import() bypasses) */
const clientModule = () => require('../client/client') as typeof import('../client/client');
const clientConfig = () => require('../config/client') as typeof import('../config/client');
const clientErrors = () => require('../client/errors') as typeof import('../client/errors');
const format = () => require('./format') as typeof import('./format');
/* eslint-enable @typescript-eslint/no-require-imports */

export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return 2;
  if (err instanceof TableFateError) return exitCodeOfError(err);
  return 1;
}

function positionals(args: string[], count: { min: number; max: number }, command: string): string[] {
  if (args.length < count.min || args.length > count.max) {
    throw new UsageError(
      `${command}: expected ${count.min === count.max ? count.min : `${count.min} to ${count.max}`} argument(s), got ${args.length}`,
    );
  }
  return args;
}

/** This package's version: package.json's, the first one up from here (from dist/cli/ as from cli/). */
function version(): string {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const fs = require('node:fs') as typeof import('node:fs');
  const path = require('node:path') as typeof import('node:path');
  /* eslint-enable @typescript-eslint/no-require-imports */
  for (let dir = path.dirname(__dirname); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
    if (path.dirname(dir) === dir) return 'unknown';
  }
}

/**
 * Runs one command and returns its exit code: bin/tablefate.js calls it with the process's arguments, environment and
 * streams; a test can call it in-process with its own (`io`), and sees exactly what a person would.
 */
export async function main(argv: string[], given: Partial<CliIo> = {}): Promise<number> {
  const io: CliIo = { ...processIo(), ...given };
  const { env } = io;
  const [command, ...rest] = argv;
  let json = rest.includes('--json');
  let exitCode = 0;
  try {
    if (!command) {
      io.err(usage());
      return 2;
    }
    if (command === '--help' || command === '-h' || command === 'help') {
      io.out(usage());
      return 0;
    }
    if (command === '--version' || command === '-v' || command === 'version') {
      io.out(version());
      return 0;
    }
    const record = findCommand(command);
    if (!record) throw new UsageError(`unknown command "${command}"; try tablefate --help`);
    if (record.raw) return await record.raw(rest, { io, env });

    let spec: CommandSpec | undefined = record.spec;
    let args = rest;
    if (record.subcommands) {
      const [sub, ...subArgs] = rest;
      spec = sub === undefined || !Object.hasOwn(record.subcommands, sub) ? undefined : record.subcommands[sub];
      if (!spec)
        throw new UsageError(
          `${command}: expected ${alternatives(Object.keys(record.subcommands))}, got ${sub === undefined ? 'nothing' : JSON.stringify(sub)}`,
        );
      args = subArgs;
    }
    if (!spec) throw new Error(`${command}: a command record with nothing to run`);

    let parsed;
    try {
      parsed = parseArgs({ args, options: { ...COMMON, ...spec.options }, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError(`${command}: ${(err as Error).message}`);
    }
    const values = parsed.values as RunContext['values'];
    json = values.json === true;
    if (values.help) {
      io.out(usage());
      return 0;
    }
    const ctx: RunContext = {
      command,
      values,
      args: positionals(parsed.positionals, spec.args, command),
      io,
      env,
      json,
      exit: (code) => (exitCode = code),
      withClient: async <T>(fn: (client: TableFateClient) => Promise<T>): Promise<T> => {
        const client = await clientModule().TableFateClient.connect(clientConfig().loadClientConfig(env));
        try {
          return await fn(client);
        } finally {
          await client.close();
        }
      },
      progress: (label) => {
        if (!io.errIsTTY || json) return undefined;
        let last = '';
        return (details) => {
          if (details === last) return;
          last = details;
          io.err(`${label}: ${details}`);
        };
      },
      unknownSizes: (tables) => {
        const unknown = ([] as TableInfo[]).concat(tables).filter((t) => t.bytes === null).length;
        if (unknown > 0 && !json)
          io.err(`size unknown (?) for ${unknown} table(s): no worker answered for a node holding them (see tablefate doctor)`);
        return tables;
      },
    };
    const result = await spec.run(ctx);
    if (result !== undefined) {
      if (json) io.out(JSON.stringify(result, null, 2));
      else io.out(Array.isArray(result) ? format().formatTableList(result) : format().formatTable(result));
    }
    return exitCode;
  } catch (err) {
    const code = exitCodeOf(err);
    // What the workflow failed with, not just "Workflow execution failed". (The SDK's errors: loaded only for an
    // error that is not one of ours, which only a command that loaded the SDK can throw.)
    const failure = err instanceof TableFateError || err instanceof UsageError ? undefined : clientErrors().applicationFailureOf(err);
    let message = err instanceof Error ? err.message : String(err);
    if (failure) message = `${message}: ${failure.type ?? 'Error'}: ${failure.message}`;
    // One line, always: some messages (node's parseArgs) span several.
    message = message.replace(/\s*\n\s*/g, ' ');
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : '';
    // (The SDK's own calls say so themselves, as ServerUnreachable: this is for anything that slipped by.)
    if (!(err instanceof TableFateError) && /failed to connect|UNAVAILABLE|ECONNREFUSED/i.test(`${message} ${cause}`)) {
      const address = env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
      message = `cannot reach the Temporal server at ${address} (${message}); is \`tablefate dev\` running?`;
    }
    const kind = err instanceof TableFateError ? err.type : err instanceof UsageError ? 'Usage' : 'Error';
    io.err(json ? JSON.stringify({ error: kind, message }) : `tablefate: ${kind}: ${message}`);
    return code;
  }
}

const processIo = (): CliIo => ({
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  errIsTTY: process.stderr.isTTY === true,
});
