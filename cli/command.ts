import type { parseArgs } from 'node:util';
import { InvalidInputError } from '../domain/errors';
import { DEFAULT_WRITE_TIMEOUT_MS } from '../domain/limits';
import type { TableInfo } from '../domain/table';
import type { TableFateClient, WriteOptions } from '../client/client';
import type { CliIo } from './io';

/**
 * One command of the command line: its name and aliases, its options, the count of its arguments, its lines of
 * `--help`, what its exit codes mean beyond the common ones, and what it runs. cli/commands.ts lists them all: one
 * place per command, as domain/operations.ts is one place per operation. A record imports nothing heavy itself:
 * what a command needs (the SDK, the worker, PostgreSQL) it requires when it runs, so that every other command starts
 * without it.
 */
export interface CommandRecord {
  name: string;
  aliases?: readonly string[];
  /** Its lines in `tablefate --help`, as printed (the first begins with the name, after two spaces). */
  usage: string;
  /** Its own exit codes, a clause of the help's last paragraph ("doctor exits 0 when ..."). */
  exits?: string;
  /** Options and arguments, and what runs: a command of its own... */
  spec?: CommandSpec;
  /** ...or subcommands (`lease acquire`), each with its own... */
  subcommands?: Readonly<Record<string, CommandSpec>>;
  /** ...or a command that parses its own arguments (with its own usage: `cluster --help`). */
  raw?: (args: string[], ctx: Pick<RunContext, 'io' | 'env'>) => Promise<number>;
}

export type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'];
export type Values = Record<string, string | boolean | undefined>;

export interface CommandSpec {
  options: Options;
  args: { min: number; max: number };
  /** What a table command returns is printed as a table (or JSON); anything else prints for itself. */
  run: (ctx: RunContext) => Promise<TableInfo | TableInfo[] | void>;
}

export interface RunContext {
  /** The command as typed (an alias: `trash`). */
  command: string;
  values: Values;
  args: string[];
  io: CliIo;
  env: NodeJS.ProcessEnv;
  json: boolean;
  /** The process's exit code, when not 0 (an error's is its own). */
  exit: (code: number) => void;
  withClient: <T>(fn: (client: TableFateClient) => Promise<T>) => Promise<T>;
  /** What a person watching sees of a long wait: the run's details on stderr, each new line once (nothing for a script or with --json). */
  progress: (label: string) => ((details: string) => void) | undefined;
  /** Says on stderr when a size could not be had (the listing itself is the catalog's, and complete). */
  unknownSizes: <T extends TableInfo | TableInfo[]>(tables: T) => T;
}

/** A command line that does not parse: exit 2, like invalid input. */
export class UsageError extends Error {}

export const COMMON = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;
/** Every table command's: how long a write waits for its answer, in seconds. */
export const TIMEOUT = { timeout: { type: 'string' } } as const;
/** The commands that run a worker serve Prometheus metrics there (TABLEFATE_METRICS_ADDRESS, which the flag overrides). */
export const METRICS_ADDRESS = { 'metrics-address': { type: 'string' } } as const;

/** `--timeout S` as the SDK's option; absent: the SDK's default. */
export function timeoutOption(values: Values): WriteOptions {
  const value = values.timeout;
  if (value === undefined) return {};
  const seconds = typeof value === 'string' && /^[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : NaN;
  if (!(seconds > 0 && seconds <= 86_400)) {
    throw new InvalidInputError(
      `--timeout must be a number of seconds above 0 and at most 86400, not "${String(value)}" (default ${DEFAULT_WRITE_TIMEOUT_MS / 1000})`,
    );
  }
  return { timeoutMs: seconds * 1000 };
}

/** A number as typed, or the text itself so that validation names what was wrong with it. */
export function numberArg(value: string | boolean | undefined): number | string | undefined {
  return typeof value === 'string' && /^-?[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : (value as string | undefined);
}

/** A table as typed: digits are an id, anything else a name (the SDK's validation says what is wrong with it). */
export function tableArg(text: string): string | number {
  return /^[0-9]+$/.test(text) ? Number(text) : text;
}

/** A string option's value (undefined when absent). */
export const str = (value: string | boolean | undefined): string | undefined => value as string | undefined;

/** "a, b or c" */
export const alternatives = (words: readonly string[]): string =>
  words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`;
