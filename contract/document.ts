import { z } from 'zod';
import type { CALLS } from '../client/call-table';
import {
  CONTRACT_CALLS,
  CONTRACT_VERSION,
  CONTRACT_WRITES,
  NEXUS_SERVICE,
  RETRIED_FAILURE_TYPES,
  contractWorkflowType,
  type ContractCallName,
} from '../domain/contract';
import type { TableFateErrorType } from '../domain/errors';
import type { LeaseInfo } from '../domain/leases';
import { searchAttributesFor, type OperationTarget, type TableOp } from '../domain/operations';
import {
  adoptRequestSchema,
  configGetRequestSchema,
  configSetRequestSchema,
  configUnsetRequestSchema,
  createRequestSchema,
  describeRequestSchema,
  holdRequestSchema,
  leaseRequestSchema,
  listLeasesRequestSchema,
  listRequestSchema,
  purgeRequestSchema,
  releaseLeaseRequestSchema,
  releaseRequestSchema,
  renameRequestSchema,
  renewLeaseRequestSchema,
  retentionRequestSchema,
  trashRequestSchema,
  undeleteRequestSchema,
} from '../domain/requests';
import type { EffectiveSetting } from '../domain/settings';
import type { TableInfo } from '../domain/table';
import { effectiveSettingSchema, leaseInfoSchema, tableInfoSchema, type Equal } from './schemas';

/**
 * The contract a service in any language calls tablefate by (issue 32): each call's workflow type, its input and output
 * as JSON Schema, the search attributes of the run it starts, and the failures it can end with, made from the code that
 * runs it (domain/contract.ts, workflows/contract.ts, the SDK's requests and answers). `tablefate contract` prints it;
 * docs/contract/contract.json is its published copy (contract/publish.ts), which a test keeps equal to it.
 */

/**
 * The failures a contract call can end with, or meet and retry. Not CatalogNotFound (the worker that runs a call has its
 * catalog open) nor OperationNotFound (cancel's, which the contract does not offer).
 */
export type ContractFailureType = Exclude<TableFateErrorType, 'CatalogNotFound' | 'OperationNotFound'>;

/** What a failure's details[0] may carry: the error's own fields (contract/activities.ts's `typed`). */
const DETAIL_FIELDS = {
  workflowId: "the operation's run, by its workflow id (trash:42@<catalog>), to look at in the Temporal UI",
  timeoutMs: 'how long the call waited, in ms',
  started: "whether the operation's run had started",
  taskQueue: 'the task queue no worker polled',
  namespace: 'the Temporal namespace',
  address: "the Temporal server's address",
  mayHaveStarted: 'whether the operation may have started before the server was lost',
} as const;
type DetailField = keyof typeof DETAIL_FIELDS;

interface FailureTerms {
  meaning: string;
  details?: readonly DetailField[];
}

/** The fields of an OperationFailedError: the run that failed. */
const RUN: readonly DetailField[] = ['workflowId'];

/** Every failure of the contract, in the order the document lists them, with what it means to a caller. */
const FAILURES: Record<ContractFailureType, FailureTerms> = {
  InvalidInput: { meaning: 'the request is malformed: the message names each field and its rule; nothing was started, nothing changed' },
  TableNotFound: { meaning: 'no such table; nothing changed' },
  TableInTrash: {
    meaning: 'the table of that name is in the trash (its id in the message): it can be recalled or named by its id, not used',
  },
  TableExists: { meaning: 'the name is held by another table, or by a create of it with other parameters; nothing changed' },
  NameTaken: { meaning: 'the name the table would take belongs to another table; nothing changed: give another name' },
  WrongState: { meaning: 'the table is not in a state that allows the call (the message says which); nothing changed' },
  HasDependents: { meaning: 'postgres driver: objects outside the table (views, foreign keys) depend on it; nothing changed' },
  TableBusy: {
    meaning: "leases, or (postgres driver) other sessions, held the table past the drop's drain timeout: the drop was taken back",
  },
  OnHold: { meaning: 'the table is under a legal hold: nothing purges it until it is released; nothing changed' },
  LeaseNotFound: { meaning: 'no such lease: never taken, released already, or expired' },
  ShardMissing: {
    meaning:
      'postgres driver: a shard table is not where tablefate put it (dropped or moved outside tablefate); `tablefate doctor` lists it',
  },
  LockLost: { meaning: "another operation took the table's lock over while this one ran; it stopped, undoing nothing", details: RUN },
  StorageFault: { meaning: 'a storage fault retrying cannot fix; what the operation had done was undone where possible', details: RUN },
  WrongCatalog: { meaning: 'the worker that took the operation serves another catalog (two catalogs share a task queue)', details: RUN },
  TrashRunAnswered: {
    meaning: 'an earlier trash of the table had answered and did not close in time for this one: call again',
    details: RUN,
  },
  WorkflowTerminated: { meaning: "the operation's run was terminated while the call waited for it", details: RUN },
  WorkflowCancelled: {
    meaning: "the operation's run was cancelled (and took back what it had done) while the call waited for it",
    details: RUN,
  },
  WorkflowTimedOut: { meaning: "the operation's run was timed out by Temporal while the call waited for it", details: RUN },
  OperationFailed: { meaning: "the operation's run failed otherwise: the message carries its failure's type and message", details: RUN },
  OperationTimeout: {
    meaning: "the call's wait for its operation passed a day; the operation goes on, and the call's next attempt joins it",
    details: ['workflowId', 'timeoutMs', 'started'],
  },
  NoWorker: {
    meaning: 'no tablefate worker polled the task queue; nothing was started',
    details: ['taskQueue', 'namespace', 'address'],
  },
  ServerUnreachable: {
    meaning: 'the worker running the call lost the Temporal server for a moment',
    details: ['address', 'mayHaveStarted', 'workflowId'],
  },
};

const FAILURE_TYPES = Object.keys(FAILURES) as ContractFailureType[];

/** What the run a write starts (or addresses) changes, which says how it can fail besides its refusals. */
type RunKind = 'shards' | 'locked' | 'lockFree';

const ANY_RUN: readonly ContractFailureType[] = [
  'WrongCatalog',
  'WorkflowTerminated',
  'WorkflowCancelled',
  'WorkflowTimedOut',
  'OperationFailed',
];
const RUN_FAILURES: Record<RunKind, readonly ContractFailureType[]> = {
  shards: ['LockLost', 'StorageFault', ...ANY_RUN],
  locked: ['LockLost', ...ANY_RUN],
  lockFree: ANY_RUN,
};
/** What a write meets on its way to the server, and its activity retries. */
const RETRIED = FAILURE_TYPES.filter((type) => RETRIED_FAILURE_TYPES.includes(type));

/** The SDK's call by the contract's name: the contract's input and output are its request and answer. */
type SdkCall<N extends ContractCallName> = (typeof CALLS)[N];
type RequestOf<N extends ContractCallName> = Parameters<SdkCall<N>['plan']>[1];
type AnswerOf<N extends ContractCallName> = Extract<Awaited<ReturnType<SdkCall<N>['plan']>>, { done: unknown }>['done'];

interface CallTerms<N extends ContractCallName> {
  /** What it does, in a line. */
  does: string;
  /** The schema the SDK parses its request with (checked below to be the SDK call's own request type). */
  request: z.ZodType;
  answer: z.ZodType;
  /**
   * The table operation's run it starts (or joins), and what that run's search attributes know of its table. None for a
   * read, a setting (its run is no table's) and a new retention (an update of the trash's run).
   */
  starts?: { op: TableOp; knows: readonly (keyof OperationTarget)[] };
  /** A write's: what its run changes (RUN_FAILURES). */
  run?: RunKind;
  /** Why it ends with each failure of its own, beyond InvalidInput's general meaning and its run's failures. */
  failures: Partial<Record<ContractFailureType, string>>;
  example: { input: RequestOf<N>; output: AnswerOf<N> };
}

const WHOLE_TABLE = ['tableId', 'namespace', 'name'] as const;

// The examples' tables, leases and settings: one table's life, shop.orders (id 42).
const orders: TableInfo = {
  id: 42,
  namespace: 'shop',
  name: 'orders',
  state: 'READY',
  shards: 4,
  placement: [0, 1, 2, 3].map((shard) => ({ shard, node: `node-${shard % 2}` })),
  createdAt: '2026-05-04T09:30:00.000Z',
  droppedAt: null,
  expireAt: null,
  purgedAt: null,
  hold: null,
};
const trashedOrders: TableInfo = {
  ...orders,
  state: 'TRASHED',
  droppedAt: '2026-06-01T08:00:00.000Z',
  expireAt: '2026-06-02T08:00:00.000Z',
};
const orderLease: LeaseInfo = {
  id: '5f1c2c1e-8a3b-4c6d-9e0f-1a2b3c4d5e6f',
  tableId: 42,
  holder: 'nightly-export',
  ttlSeconds: 300,
  acquiredAt: '2026-05-20T02:00:00.000Z',
  expiresAt: '2026-05-20T02:05:00.000Z',
};
const retentionInShop: EffectiveSetting = { key: 'trash.retentionSeconds', value: 86_400, source: 'namespace', namespace: 'shop' };

/** Every call of the contract: what it is beside its workflow, in one place. */
const CALL_TERMS = {
  create: {
    does: 'creates a table (or answers the one this same create made already)',
    request: createRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'create', knows: ['namespace', 'name'] },
    run: 'shards',
    failures: {
      InvalidInput: 'also: columns or like with the files driver, a definition PostgreSQL refuses, a name too long for its shard tables',
      TableExists: 'the name is held by another table, or a create of it with other parameters is under way',
      ShardMissing: 'postgres driver: a shard table this create made is gone (a create resumed)',
    },
    example: { input: { table: 'shop.orders', shards: 4 }, output: orders },
  },
  adopt: {
    does: 'postgres driver: registers an existing PostgreSQL table as a READY table of one shard',
    request: adoptRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'adopt', knows: ['namespace', 'name'] },
    run: 'shards',
    failures: {
      InvalidInput: 'also: the deployment does not use the postgres driver, no such storage node, a table that cannot be adopted',
      TableNotFound: 'there is no such PostgreSQL table on that node',
      TableExists: 'the name is held by a table, or the PostgreSQL table is managed by tablefate already',
    },
    example: {
      input: { table: 'shop.legacy_orders', node: 'node-0' },
      output: { ...orders, id: 43, name: 'legacy_orders', shards: 1, placement: [{ shard: 0, node: 'node-0' }] },
    },
  },
  trash: {
    does: 'drops a table into the trash: it leaves its name at once, its data is kept until the retention runs out',
    request: trashRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'trash', knows: WHOLE_TABLE },
    run: 'shards',
    failures: {
      TableNotFound: 'no live table has that name',
      TableInTrash: 'the table of that name is in the trash already',
      WrongState: 'another operation holds the table, it no longer bears the name, or a drop of it with another retention answered first',
      TableBusy: 'leases (or PostgreSQL sessions) held it past the drain timeout: it is READY again',
      HasDependents: 'postgres driver: objects outside the table depend on it',
      ShardMissing: 'postgres driver: a shard table is not where tablefate put it',
      TrashRunAnswered: 'an earlier trash of the table had answered and did not close in time',
    },
    example: { input: { table: 'shop.orders', retentionSeconds: 86_400 }, output: trashedOrders },
  },
  undelete: {
    does: 'recalls a table from the trash, under its name or a new one',
    request: undeleteRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'undelete', knows: WHOLE_TABLE },
    run: 'shards',
    failures: {
      InvalidInput: "also (postgres driver): a new name in a schema tablefate's or PostgreSQL's own",
      TableNotFound: 'no table of that id, or none of that name in the trash',
      WrongState: 'it is not in the trash, its expiry passed (it is being purged), it no longer bears the name, or a recall of it runs',
      NameTaken: 'the name it would come back under is held by another table: give newName',
      TableBusy: "postgres driver: other sessions held the table (or a table its keys reference) past a drop's default drain timeout",
      ShardMissing: 'postgres driver: a shard table is not where tablefate put it',
    },
    example: { input: { table: 42 }, output: orders },
  },
  purge: {
    does: 'deletes a trashed table for good, now; the table stays as a PURGED tombstone',
    request: purgeRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'purge', knows: WHOLE_TABLE },
    run: 'shards',
    failures: {
      TableNotFound: 'no table has that id',
      OnHold: 'the table is under a legal hold: release it first',
      WrongState: 'the table is not in the trash',
      HasDependents: 'postgres driver: objects outside the table depend on it',
      TableBusy: "postgres driver: other sessions held the table past a drop's default drain timeout",
      ShardMissing: 'postgres driver: a shard table is not where tablefate put it',
    },
    example: { input: { tableId: 42 }, output: { ...trashedOrders, state: 'PURGED', purgedAt: '2026-06-01T09:15:00.000Z' } },
  },
  rename: {
    does: 'renames a READY table',
    request: renameRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'rename', knows: WHOLE_TABLE },
    run: 'locked',
    failures: {
      InvalidInput: 'also: the deployment uses the postgres driver (rename is not available there yet)',
      TableNotFound: 'no table of that id, or no live table of that name',
      TableInTrash: 'the table of that name is in the trash',
      WrongState: 'the table is not READY, no longer bears the name, or a rename of it runs',
      NameTaken: 'the new name is held by another table',
    },
    example: { input: { table: 'shop.orders', newName: 'shop.orders_2025' }, output: { ...orders, name: 'orders_2025' } },
  },
  hold: {
    does: 'places a legal hold on a table: while held, nothing purges it',
    request: holdRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'hold', knows: WHOLE_TABLE },
    run: 'locked',
    failures: {
      TableNotFound: 'no live or trashed table of that id or name',
      WrongState: 'the table is on its way elsewhere (only a READY or trashed one is held), held for another reason, or a hold of it runs',
    },
    example: {
      input: { table: 42, reason: 'LEGAL-1234' },
      output: { ...trashedOrders, hold: { reason: 'LEGAL-1234', since: '2026-06-01T10:00:00.000Z' } },
    },
  },
  release: {
    does: "releases a table's legal hold (a trashed table past its expiry is then purged)",
    request: releaseRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'release', knows: WHOLE_TABLE },
    run: 'locked',
    failures: {
      TableNotFound: 'no live or trashed table of that id or name',
      WrongState: 'the table is not on hold, or a release of it runs',
    },
    example: { input: { table: 42 }, output: trashedOrders },
  },
  setRetention: {
    does: "gives a trashed table a new retention, counted from its drop (an update of its trash's run: it starts none)",
    request: retentionRequestSchema,
    answer: tableInfoSchema,
    run: 'lockFree',
    failures: {
      TableNotFound: 'no table of that id, or none of that name in the trash',
      WrongState: "it is not in the trash (or its trash has ended), another operation holds it, or its trash's run is being re-armed",
    },
    example: {
      input: { table: 42, retentionSeconds: 2_592_000 },
      output: { ...trashedOrders, expireAt: '2026-07-01T08:00:00.000Z' },
    },
  },
  acquireLease: {
    does: 'takes a lease on a READY table: a drop waits for it (up to its drain timeout) instead of pulling the table from under its holder',
    request: leaseRequestSchema,
    answer: leaseInfoSchema,
    starts: { op: 'lease', knows: WHOLE_TABLE },
    run: 'lockFree',
    failures: {
      TableNotFound: 'no live or trashed table of that id or name',
      WrongState: 'the table is not READY (a drop waits for its leases, or it is in the trash)',
    },
    example: { input: { table: 'shop.orders', ttlSeconds: 300, holder: 'nightly-export' }, output: orderLease },
  },
  renewLease: {
    does: 'renews a lease for ttlSeconds from now',
    request: renewLeaseRequestSchema,
    answer: leaseInfoSchema,
    starts: { op: 'lease', knows: [] },
    run: 'lockFree',
    failures: { LeaseNotFound: 'no such lease: never taken, released, or expired' },
    example: { input: { leaseId: orderLease.id, ttlSeconds: 300 }, output: { ...orderLease, expiresAt: '2026-05-20T02:09:00.000Z' } },
  },
  releaseLease: {
    does: 'releases a lease (a drop that waits for it goes on)',
    request: releaseLeaseRequestSchema,
    answer: leaseInfoSchema,
    starts: { op: 'lease', knows: [] },
    run: 'lockFree',
    failures: { LeaseNotFound: 'no such lease: never taken, or released already' },
    example: { input: { leaseId: orderLease.id }, output: orderLease },
  },
  setSetting: {
    does: 'sets a runtime setting, globally or for a namespace',
    request: configSetRequestSchema,
    answer: effectiveSettingSchema,
    run: 'lockFree',
    failures: {},
    example: { input: { key: 'trash.retentionSeconds', value: '86400', namespace: 'shop' }, output: retentionInShop },
  },
  unsetSetting: {
    does: 'removes a runtime setting, globally or for a namespace: the one below applies again',
    request: configUnsetRequestSchema,
    answer: effectiveSettingSchema,
    run: 'lockFree',
    failures: {},
    example: {
      input: { key: 'trash.retentionSeconds', namespace: 'shop' },
      output: { ...retentionInShop, value: 604_800, source: 'default' },
    },
  },
  describe: {
    does: 'one table, by id (any, tombstones included) or by name (a live one)',
    request: describeRequestSchema,
    answer: tableInfoSchema,
    failures: {
      TableNotFound: 'no table of that id, or no live table of that name',
      TableInTrash: 'the table of that name is in the trash: describe it by its id',
    },
    example: { input: { table: 'shop.orders', withSizes: true }, output: { ...orders, bytes: 18_350_080 } },
  },
  list: {
    does: 'the tables by id, live ones (and trashed ones, with includeTrashed), a page at a time',
    request: listRequestSchema,
    answer: z.array(tableInfoSchema),
    failures: {},
    example: {
      input: { includeTrashed: true, limit: 100 },
      output: [{ ...trashedOrders, id: 41, name: 'orders_2024', createdAt: '2025-01-02T00:00:00.000Z' }, orders],
    },
  },
  listLeases: {
    does: 'the leases that hold, of one table or of all',
    request: listLeasesRequestSchema,
    answer: z.array(leaseInfoSchema),
    failures: { TableNotFound: 'no live or trashed table of that id or name' },
    example: { input: { table: 'shop.orders' }, output: [orderLease] },
  },
  getSettings: {
    does: 'the runtime settings as they apply, globally or in a namespace: one key or all',
    request: configGetRequestSchema,
    answer: z.array(effectiveSettingSchema),
    failures: {},
    example: {
      input: { namespace: 'shop' },
      output: [
        { key: 'trash.enabled', value: true, source: 'default', namespace: 'shop' },
        retentionInShop,
        { key: 'trash.maxBytes', value: null, source: 'global', namespace: 'shop' },
      ],
    },
  },
} as const satisfies { [N in ContractCallName]: CallTerms<N> };

/** The calls whose schemas are not the SDK call's own request and answer types: none, or this fails to compile. */
type Mismatched = {
  [N in ContractCallName]: [
    Equal<z.input<(typeof CALL_TERMS)[N]['request']>, RequestOf<N>>,
    Equal<z.output<(typeof CALL_TERMS)[N]['answer']>, AnswerOf<N>>,
  ] extends [true, true]
    ? never
    : N;
}[ContractCallName];
const schemasMatchTheSdk: Record<Mismatched, 'its request or answer schema is not the type of the SDK call'> = {};
void schemasMatchTheSdk;

/** The request schema of each call, for a caller (the test) to parse an input exactly as the call will. */
export const contractRequestSchema = (name: ContractCallName): z.ZodType => CALL_TERMS[name].request;
export const contractAnswerSchema = (name: ContractCallName): z.ZodType => CALL_TERMS[name].answer;

const WORKFLOW_ID_RULE =
  'any id of yours, unique per request, kept for its retries; start with workflowIdConflictPolicy USE_EXISTING and ' +
  'workflowIdReusePolicy REJECT_DUPLICATE: the same id again joins its run while it is open, and once it has closed is ' +
  "refused as already started, when you read that run's result by the id (one operation, one answer)";

type JsonSchema = z.core.JSONSchema.JSONSchema;
/** A subschema as JSON Schema allows it (`true`: anything), as an object to read. */
const schemaOf = (schema: z.core.JSONSchema._JSONSchema): JsonSchema => (typeof schema === 'boolean' ? {} : schema);

export interface ContractFailure {
  type: ContractFailureType;
  /**
   * The call's activity tries again (RETRIED_FAILURE_TYPES): the call does not end with it, a caller sees it only as the
   * pending activity's last failure.
   */
  retryable: boolean;
  meaning: string;
}

export interface ContractSearchAttribute {
  name: string;
  /** Temporal's search attribute type: KEYWORD, INT. */
  type: string;
  /** Its value, when it is the same for every run of the call (TableOp); the others are the table's. */
  value?: string;
}

export interface ContractOperation {
  name: ContractCallName;
  kind: 'write' | 'read';
  does: string;
  workflowType: string;
  workflowId: string;
  taskQueue: string;
  nexus: { service: string; operation: ContractCallName };
  input: JsonSchema;
  output: JsonSchema;
  example: { workflowId: string; input: unknown; output: unknown };
  /** The search attributes of the operation's run the call starts: none for a read, a setting, or a new retention. */
  searchAttributes: ContractSearchAttribute[];
  failures: ContractFailure[];
}

export interface ContractDocument {
  version: number;
  service: string;
  namespace: string;
  taskQueue: string;
  workflowIdRule: string;
  operations: ContractOperation[];
  failures: Array<ContractFailure & { details: Partial<Record<DetailField, string>> }>;
}

/** The contract as the deployment at `namespace` and `taskQueue` offers it. */
export function contractDocument(opts: { namespace: string; taskQueue: string }): ContractDocument {
  const operations = CONTRACT_CALLS.map((name) => operationOf(name, opts.taskQueue));
  const named = new Set(operations.flatMap((op) => op.failures.map((f) => f.type)));
  return {
    version: CONTRACT_VERSION,
    service: NEXUS_SERVICE,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowIdRule: WORKFLOW_ID_RULE,
    operations,
    failures: FAILURE_TYPES.filter((type) => named.has(type)).map((type) => ({
      ...failureOf(type),
      details: Object.fromEntries((FAILURES[type].details ?? []).map((field) => [field, DETAIL_FIELDS[field]])),
    })),
  };
}

function operationOf(name: ContractCallName, taskQueue: string): ContractOperation {
  const terms: CallTerms<ContractCallName> = CALL_TERMS[name];
  const isWrite = (CONTRACT_WRITES as readonly string[]).includes(name);
  const own = terms.failures;
  const types = new Set<ContractFailureType>([
    'InvalidInput',
    ...(Object.keys(own) as ContractFailureType[]),
    ...(terms.run ? [...RUN_FAILURES[terms.run], ...RETRIED] : []),
  ]);
  return {
    name,
    kind: isWrite ? 'write' : 'read',
    does: terms.does,
    workflowType: contractWorkflowType(name),
    workflowId: WORKFLOW_ID_RULE,
    taskQueue,
    nexus: { service: NEXUS_SERVICE, operation: name },
    input: z.toJSONSchema(terms.request, { io: 'input' }),
    output: z.toJSONSchema(terms.answer, { io: 'output', override: openObjects }),
    example: { workflowId: `shop-api-${name}-7d9f1c2a`, ...terms.example },
    searchAttributes: terms.starts ? searchAttributesOf(terms.starts) : [],
    failures: FAILURE_TYPES.filter((type) => types.has(type)).map((type) => ({
      ...failureOf(type),
      meaning: own[type] ?? FAILURES[type].meaning,
    })),
  };
}

function failureOf(type: ContractFailureType): ContractFailure {
  return { type, retryable: RETRIED_FAILURE_TYPES.includes(type), meaning: FAILURES[type].meaning };
}

/**
 * An answer may gain fields (an additive change, not a breaking one: see docs/contract/README.md), so its schema does
 * not refuse the ones it does not name. (A request's does: the SDK refuses a field it does not know.)
 */
function openObjects({ jsonSchema }: { jsonSchema: JsonSchema }): void {
  if (jsonSchema.type === 'object') delete jsonSchema.additionalProperties;
}

/**
 * The search attributes of the run a call starts, as the operation's record makes them. An attribute whose value is the
 * same for two different tables is the operation's own (TableOp), and is given; the others are the table's.
 */
function searchAttributesOf({ op, knows }: NonNullable<CallTerms<ContractCallName>['starts']>): ContractSearchAttribute[] {
  const known = (table: Required<OperationTarget>): OperationTarget => Object.fromEntries(knows.map((key) => [key, table[key]]));
  const one = searchAttributesFor(op, known({ tableId: 1, namespace: 'a', name: 'a' }));
  const other = searchAttributesFor(op, known({ tableId: 2, namespace: 'b', name: 'b' }));
  return one.map(({ key, value }, i) => ({
    name: key.name,
    type: key.type,
    ...(value === other[i]!.value ? { value: String(value) } : {}),
  }));
}

/** A JSON Schema's fields, as a line of a table: `table, shards?, columns?`. */
function fieldsOf(schema: JsonSchema): string {
  const properties = Object.keys(schema.properties ?? {});
  const required = new Set(schema.required);
  return properties.length === 0 ? '(none)' : properties.map((field) => (required.has(field) ? field : `${field}?`)).join(', ');
}

/** What an answer is, by its schema's title: `TableInfo`, `TableInfo[]`. */
function answerOf(schema: JsonSchema): string {
  const { items } = schema;
  return items !== undefined && !Array.isArray(items) ? `${answerOf(schemaOf(items))}[]` : (schema.title ?? 'any');
}

/** The calls as a Markdown table (docs/contract/README.md has it, as contract/publish.ts writes it). */
export function renderCallTable(doc: ContractDocument): string {
  const rows = doc.operations.map((op) => `| \`${op.name}\` | ${op.kind} | ${op.does} | ${fieldsOf(op.input)} | ${answerOf(op.output)} |`);
  return ['| call | kind | what it does | input | output |', '|---|---|---|---|---|', ...rows].join('\n');
}

/** The failures as a Markdown table (docs/contract/README.md has it, as contract/publish.ts writes it). */
export function renderFailureTable(doc: ContractDocument): string {
  const rows = doc.failures.map(
    (f) => `| \`${f.type}\` | ${f.retryable ? 'yes' : 'no'} | ${f.meaning} | ${Object.keys(f.details).join(', ') || '-'} |`,
  );
  return ['| type | retried by the call | meaning | details[0] fields |', '|---|---|---|---|', ...rows].join('\n');
}

/** The contract for a person at a terminal (`tablefate contract`): every call, then every failure. */
export function renderContractMarkdown(doc: ContractDocument): string {
  const lines = [
    `# tablefate contract v${doc.version}`,
    '',
    `Temporal namespace ${doc.namespace}, task queue ${doc.taskQueue}; also Nexus service ${doc.service}, one operation per call.`,
    'Start a call as a workflow by its type name, with the request as its one JSON argument; its result is the answer.',
    `Workflow id: ${doc.workflowIdRule}.`,
    'A failure is an ApplicationFailure: its type is one of the failures below, its details[0] the fields they list.',
    "`tablefate contract --json` prints the same with each call's JSON Schemas and an example.",
  ];
  for (const op of doc.operations) {
    const properties = op.input.properties ?? {};
    const required = new Set(op.input.required);
    lines.push('', `## ${op.name} (${op.kind}): ${op.workflowType}`, '', op.does);
    lines.push('', 'input:');
    if (Object.keys(properties).length === 0) lines.push('  (none)');
    for (const [field, subschema] of Object.entries(properties)) {
      const schema = schemaOf(subschema);
      const given = required.has(field) ? 'required' : 'default' in schema ? `default ${JSON.stringify(schema.default)}` : 'optional';
      const oneOf = Array.isArray(schema.enum) ? ` (one of ${schema.enum.join(', ')})` : '';
      lines.push(`  ${field} (${given})${schema.description ? `: ${schema.description}` : ''}${oneOf}`);
    }
    lines.push(`output: ${answerOf(op.output)}`);
    if (op.searchAttributes.length > 0) {
      const attributes = op.searchAttributes.map((a) => (a.value === undefined ? a.name : `${a.name}=${a.value}`));
      lines.push(`its operation's run: search attributes ${attributes.join(', ')}`);
    }
    lines.push(`failures: ${op.failures.map((f) => f.type).join(', ')}`);
    for (const f of op.failures) if (f.meaning !== FAILURES[f.type].meaning) lines.push(`  ${f.type}: ${f.meaning}`);
    lines.push(`example: ${JSON.stringify(op.example.input)}`);
  }
  lines.push('', '## failures', '');
  for (const f of doc.failures) {
    const details = Object.keys(f.details);
    lines.push(
      `${f.type}${f.retryable ? ' (retried by the call)' : ''}: ${f.meaning}${details.length ? ` [details: ${details.join(', ')}]` : ''}`,
    );
  }
  return lines.join('\n');
}
