import { ERROR_MEANINGS, EXIT_CODE_NOTES } from '../domain/error-meanings';
import { alternatives, type CommandRecord } from './command';
import * as catalog from './catalog-commands';
import { contract } from './contract-command';
import * as services from './service-commands';
import * as tables from './table-commands';

/**
 * Every command of the command line, in the order `tablefate --help` lists them: `--help`, each command's options
 * and argument count, and what its own exit codes mean are all read from here (cli/command.ts says what a record
 * holds); the exit codes every command shares, from the errors' (domain/error-meanings.ts).
 */
export const COMMANDS: readonly (CommandRecord | string)[] = [
  services.dev,
  services.worker,
  services.storageNode,
  services.cluster,
  services.METRICS_NOTE,
  tables.create,
  tables.adopt,
  tables.drop,
  tables.truncate,
  tables.recall,
  tables.purge,
  tables.retention,
  tables.hold,
  tables.release,
  tables.lease,
  tables.config,
  tables.rename,
  catalog.ls,
  catalog.describe,
  catalog.ops,
  catalog.history,
  catalog.cancel,
  services.quarantine,
  services.guard,
  services.doctor,
  contract,
];

const records = COMMANDS.filter((c): c is CommandRecord => typeof c !== 'string');

/** The command a word names (its name or an alias), if any. */
export function findCommand(word: string): CommandRecord | undefined {
  return records.find((c) => c.name === word || c.aliases?.includes(word));
}

const COMMON_HELP = `every command takes --json. the table commands (create to describe) and cancel take --timeout S: how long a write
waits for its answer (default 60); past it, it exits 5 and the operation goes on in the background.
on a terminal (and without --json), a write that waits shows on stderr what its run is doing.
environment: TABLEFATE_HOME (default ./.tablefate), TEMPORAL_ADDRESS (default 127.0.0.1:7233),
TEMPORAL_NAMESPACE (default default).`;

/** The help's width: a paragraph made from parts (the exit codes) is wrapped to it. */
const WIDTH = 116;

/** `text`'s lines, each broken into lines of at most WIDTH characters (a longer word alone on its line). */
function wrap(text: string): string {
  return text.split('\n').map(wrapLine).join('\n');
}

function wrapLine(text: string): string {
  const lines: string[] = [];
  for (const word of text.split(' ')) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= WIDTH) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines.join('\n');
}

/** The exit codes every command shares: a line a code, with the help words of its error types (domain/error-meanings.ts). */
function exitCodesHelp(): string {
  const words = new Map<number, string[]>();
  const add = (code: number, help: string) => words.set(code, [...(words.get(code) ?? []), help]);
  for (const { exitCode, help, onceStarted } of Object.values(ERROR_MEANINGS)) {
    add(exitCode, help);
    if (onceStarted) add(onceStarted.exitCode, onceStarted.help);
  }
  const codes = [...words]
    .sort(([a], [b]) => a - b)
    .map(([code, helps]) => `${code} ${alternatives(helps)}${code in EXIT_CODE_NOTES ? ` (${EXIT_CODE_NOTES[code]})` : ''}`);
  return wrap(`exit codes: 0 ok, ${codes.join(',\n')}, 1 other;`);
}

/** `tablefate --help`: every command's lines, the common options and exit codes, then each command's own exit codes. */
export function usage(): string {
  const lines = COMMANDS.map((c) => (typeof c === 'string' ? c : c.usage));
  const exits = [...new Set(records.flatMap((c) => (c.exits === undefined ? [] : [c.exits])))];
  return `usage: tablefate <command> [options]\n\n${lines.join('\n')}\n\n${COMMON_HELP}\n${exitCodesHelp()}\n${exits.join(';\n')}.`;
}
