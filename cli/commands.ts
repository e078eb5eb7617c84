import type { CommandRecord } from './command';
import * as catalog from './catalog-commands';
import { contract } from './contract-command';
import * as services from './service-commands';
import * as tables from './table-commands';

/**
 * Every command of the command line, in the order `tablefate --help` lists them: `--help`, each command's options
 * and argument count, and what its exit codes mean are all read from here (cli/command.ts says what a record holds).
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
TEMPORAL_NAMESPACE (default default).
exit codes: 0 ok, 2 invalid input, 3 not found, in the trash, or no such lease, 4 exists, name taken, wrong
state, has dependents, busy, on hold or a shard table missing,
5 no answer within --timeout or the server lost after the start (the operation may go on),
6 no catalog, no worker or no server (nothing started),
7 the operation failed (lock lost, storage fault, wrong catalog, workflow terminated...), 1 other;`;

/** `tablefate --help`: every command's lines, the common options and exit codes, then each command's own exit codes. */
export function usage(): string {
  const lines = COMMANDS.map((c) => (typeof c === 'string' ? c : c.usage));
  const exits = [...new Set(records.flatMap((c) => (c.exits === undefined ? [] : [c.exits])))];
  return `usage: tablefate <command> [options]\n\n${lines.join('\n')}\n\n${COMMON_HELP}\n${exits.join(';\n')}.`;
}
