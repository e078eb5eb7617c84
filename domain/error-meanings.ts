import { ServerUnreachableError, type TableFateError, type TableFateErrorType } from './errors';

/**
 * What each error type (domain/errors.ts) means, and the command line's exit code for it: said once, here. The contract
 * (contract/failures.ts) gives a caller the meaning; the command line exits with the code (cli/main.ts) and its
 * `--help` lists each code with the `help` words of its types (cli/commands.ts).
 */
export interface ErrorMeaning {
  /** What it means to a caller: what happened, and what it changed. */
  meaning: string;
  /** The command line's exit code. */
  exitCode: number;
  /**
   * The SQLSTATE the SQL door raises it with (docs/postgres.md, "The SQL door"): PostgreSQL's own where one fits, else
   * class 58 (outside PostgreSQL) or tablefate's own class TF (TF001: the wait ended, the operation goes on; TF002: no
   * worker took the request).
   */
  sqlstate: string;
  /** How `tablefate --help` names it, among the others of its exit code. */
  help: string;
  /** An error that says its operation may have started (ServerUnreachableError's `mayHaveStarted`) exits so instead. */
  onceStarted?: { exitCode: number; help: string };
}

export const ERROR_MEANINGS: Record<TableFateErrorType, ErrorMeaning> = {
  InvalidInput: {
    meaning: 'the request is malformed: the message names each field and its rule; nothing was started, nothing changed',
    exitCode: 2,
    sqlstate: '22023',
    help: 'invalid input',
  },
  TableNotFound: { meaning: 'no such table; nothing changed', exitCode: 3, sqlstate: '42P01', help: 'not found' },
  // Accumulo's TableDeletedException.
  TableInTrash: {
    meaning: 'the table of that name is in the trash (its id in the message): it can be recalled or named by its id, not used',
    exitCode: 3,
    sqlstate: '42P01',
    help: 'in the trash',
  },
  TableExists: {
    meaning: 'the name is held by another table, or by a create of it with other parameters; nothing changed',
    exitCode: 4,
    sqlstate: '42P07',
    help: 'exists',
  },
  NameTaken: {
    meaning: 'the name the table would take belongs to another table; nothing changed: give another name',
    exitCode: 4,
    sqlstate: '42P07',
    help: 'name taken',
  },
  WrongState: {
    meaning: 'the table is not in a state that allows the call (the message says which); nothing changed',
    exitCode: 4,
    sqlstate: '55000',
    help: 'wrong state',
  },
  HasDependents: {
    meaning: 'postgres driver: objects outside the table (views, foreign keys) depend on it; nothing changed',
    exitCode: 4,
    sqlstate: '2BP01',
    help: 'has dependents',
  },
  TableBusy: {
    meaning: "leases, or (postgres driver) other sessions, held the table past the drop's drain timeout: the drop was taken back",
    exitCode: 4,
    sqlstate: '55006',
    help: 'busy',
  },
  OnHold: {
    meaning: 'the table is under a legal hold: nothing purges it until it is released; nothing changed',
    exitCode: 4,
    sqlstate: '55000',
    help: 'on hold',
  },
  LeaseNotFound: {
    meaning: 'no such lease: never taken, released already, or expired',
    exitCode: 3,
    sqlstate: '42704',
    help: 'no such lease',
  },
  ShardMissing: {
    meaning:
      'postgres driver: a shard table is not where tablefate put it (dropped, renamed or moved outside tablefate); nothing was ' +
      'done to whatever is there: `tablefate doctor` lists it',
    exitCode: 4,
    sqlstate: '55000',
    help: 'a shard table missing',
  },
  LockLost: {
    meaning: "another operation took the table's lock over while this one ran; it stopped, undoing nothing",
    exitCode: 7,
    sqlstate: '58000',
    help: 'lock lost',
  },
  StorageFault: {
    meaning: 'a storage fault retrying cannot fix; what the operation had done was undone where possible',
    exitCode: 7,
    sqlstate: '58030',
    help: 'storage fault',
  },
  WrongCatalog: {
    meaning: 'the worker that took the operation serves another catalog (two catalogs share a task queue)',
    exitCode: 7,
    sqlstate: '58000',
    help: 'wrong catalog',
  },
  WorkflowTerminated: {
    meaning: "the operation's run was terminated while the call waited for it",
    exitCode: 7,
    sqlstate: '57000',
    help: 'workflow terminated',
  },
  WorkflowCancelled: {
    meaning: "the operation's run was cancelled (and took back what it had done) while the call waited for it",
    exitCode: 7,
    sqlstate: '57014',
    help: 'workflow cancelled',
  },
  WorkflowTimedOut: {
    meaning: "the operation's run was timed out by Temporal while the call waited for it",
    exitCode: 7,
    sqlstate: '58000',
    help: 'workflow timed out',
  },
  OperationFailed: {
    meaning: "the operation's run failed otherwise: the message carries its failure's type and message",
    exitCode: 7,
    sqlstate: '58000',
    help: 'another failure',
  },
  OperationNotFound: {
    meaning:
      'no operation of this catalog runs or ran under that workflow id (a cancel names it): an id of another catalog, a typing ' +
      "error, or a run the server has forgotten (past the namespace's retention); nothing changed",
    exitCode: 3,
    sqlstate: '42704',
    help: 'no such run',
  },
  OperationTimeout: {
    meaning: "the call's deadline passed before its operation answered; the operation goes on in the background",
    exitCode: 5,
    sqlstate: 'TF001',
    help: 'no answer within --timeout',
  },
  CatalogNotFound: {
    meaning: 'there is no catalog where the configuration ($TABLEFATE_HOME) points; nothing was created or read',
    exitCode: 6,
    sqlstate: '58000',
    help: 'no catalog',
  },
  NoWorker: {
    meaning: 'no tablefate worker polled the task queue; nothing was started',
    exitCode: 6,
    sqlstate: 'TF002',
    help: 'no worker',
  },
  ServerUnreachable: {
    meaning:
      "the Temporal server did not answer (refused, unreachable, or too slow): before a write's start nothing started; lost " +
      'after it, the operation may go on',
    exitCode: 6,
    sqlstate: '58000',
    help: 'no server',
    // Like a timeout: the operation may go on.
    onceStarted: { exitCode: 5, help: 'the server lost after the start' },
  },
};

/** What an exit code says of all its types at once, in `tablefate --help`. */
export const EXIT_CODE_NOTES: Readonly<Record<number, string>> = {
  5: 'the operation may go on',
  6: 'nothing started',
  7: 'the operation ran and failed',
};

/** The command line's exit code for `err`. */
export function exitCodeOfError(err: TableFateError): number {
  const { exitCode, onceStarted } = ERROR_MEANINGS[err.type];
  return onceStarted && err instanceof ServerUnreachableError && err.mayHaveStarted ? onceStarted.exitCode : exitCode;
}
