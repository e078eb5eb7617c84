import { z } from 'zod';
import type { CALLS } from '../client/call-table';
import type { ContractCallName } from '../domain/contract';
import type { LeaseInfo } from '../domain/leases';
import type { OperationTarget, TableOp } from '../domain/operations';
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
  truncateRequestSchema,
  undeleteRequestSchema,
} from '../domain/requests';
import type { EffectiveSetting } from '../domain/settings';
import type { TableInfo } from '../domain/table';
import type { ContractFailureType, RunKind } from './failures';
import { effectiveSettingSchema, leaseInfoSchema, tableInfoSchema, type Equal } from './schemas';

/**
 * The contract's calls as data (contract/document.ts makes the document of them): what each does, the schemas of its
 * request and answer (checked below to be the SDK call's own types), the run it starts, why it fails, and an example.
 */

/** The SDK's call by the contract's name: the contract's input and output are its request and answer. */
type SdkCall<N extends ContractCallName> = (typeof CALLS)[N];
type RequestOf<N extends ContractCallName> = Parameters<SdkCall<N>['plan']>[1];
type AnswerOf<N extends ContractCallName> = Extract<Awaited<ReturnType<SdkCall<N>['plan']>>, { done: unknown }>['done'];

export interface CallTerms<N extends ContractCallName> {
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
  droppedBy: null,
  expireAt: null,
  purgedAt: null,
  hold: null,
};
const trashedOrders: TableInfo = {
  ...orders,
  state: 'TRASHED',
  droppedAt: '2026-06-01T08:00:00.000Z',
  droppedBy: 'orders-service@app-7',
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
export const CALL_TERMS = {
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
    does: 'drops a table into the trash: it leaves its name at once, its data is kept until the retention runs out (with dryRun: says what the drop would do, and does nothing)',
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
    },
    example: { input: { table: 'shop.orders', retentionSeconds: 86_400 }, output: trashedOrders },
  },
  truncate: {
    does: 'truncates a table into the trash: its rows become a trash entry of their own (a new id under its name, recalled under a new name, held or purged as a dropped table), and the table stays live and empty under its id; answers that entry',
    request: truncateRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'truncate', knows: WHOLE_TABLE },
    run: 'shards',
    failures: {
      TableNotFound: 'no table of that id, or no live table of that name',
      TableInTrash: 'the table of that name is in the trash',
      WrongState: 'the table is not READY, no longer bears the name, or another operation holds it',
      TableBusy: 'leases (or PostgreSQL sessions) held it past the drain timeout: it is READY again, its rows in it',
      HasDependents:
        "postgres driver: another table's foreign key references it (without cascade; with cascade, a table tablefate does not keep), something the empty table could not stand in for depends on it, or it is of a kind it cannot be (named)",
      ShardMissing: 'postgres driver: a shard table is not where tablefate put it',
    },
    example: {
      input: { table: 'shop.orders', retentionSeconds: 86_400 },
      output: { ...trashedOrders, id: 57, truncatedFrom: 42 },
    },
  },
  undelete: {
    does: "recalls a table from the trash, under its name or a new one; with inPlace, a truncate's entry back in its table's place (that table, with the rows written since, into the trash as a drop puts it)",
    request: undeleteRequestSchema,
    answer: tableInfoSchema,
    starts: { op: 'undelete', knows: WHOLE_TABLE },
    run: 'shards',
    failures: {
      InvalidInput:
        "also (postgres driver): a new name in a schema tablefate's or PostgreSQL's own; inPlace of a table no truncate made, or with a new name",
      TableNotFound: 'no table of that id, or none of that name in the trash',
      WrongState:
        'it is not in the trash, its expiry passed (it is being purged), it no longer bears the name, or a recall of it runs; inPlace: its table is no longer live under its name, or the trash is off there',
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
      InvalidInput: 'also: PostgreSQL driver, the new name is over 63 bytes with its shard suffix, or in a schema tablefate keeps',
      TableNotFound: 'no table of that id, or no live table of that name',
      TableInTrash: 'the table of that name is in the trash',
      WrongState: 'the table is not READY, no longer bears the name, or a rename of it runs',
      NameTaken: 'the new name is held by another table (PostgreSQL: or, on a node, by a table tablefate did not place); taken back',
      TableBusy: 'PostgreSQL driver: sessions still used the table at the drain deadline (named); taken back',
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
