import { z } from 'zod';
import { checkColumnDefinitions } from './columns';
import { IDENTIFIER_PART, namespaceSchema, tableIdSchema, tableNameSchema, tableRefSchema } from './name-schemas';
import { parseNameParts } from './names';
import { InvalidInputError } from './errors';
import type { TableOp } from './operations';
import {
  MAX_DRAIN_TIMEOUT_SECONDS,
  MAX_LIST_LIMIT,
  MAX_TABLES_DROPPED_TOGETHER,
  MAX_RETENTION_SECONDS,
  MIN_RETENTION_SECONDS,
} from './limits';
import { DEFAULT_LEASE_TTL_SECONDS, MAX_LEASE_TTL_SECONDS } from './leases';
import { isSettingKey, parseSettingValue, SETTING_KEYS, type SettingKey, type SettingValue } from './settings';

/** The most shards a table may have. */
export const MAX_SHARDS = 256;
export const DEFAULT_SHARDS = 4;

/** The requests the SDK accepts. Everything entering tablefate passes one of these, once, at the edge. */
/** Column definitions for the PostgreSQL driver: what fits between one CREATE TABLE's parentheses, nothing more. */
const columnsSchema = z
  .string()
  .superRefine((text, ctx) => {
    const check = checkColumnDefinitions(text);
    if (!check.ok) ctx.addIssue({ code: 'custom', message: check.reason });
  })
  .meta({
    description: 'PostgreSQL driver: the column definitions, as between the parentheses of CREATE TABLE; not with like',
    examples: ['id bigint primary key, placed_at timestamptz not null'],
  });

/** The table a PostgreSQL create copies the structure of: `schema.table`, each part as psql writes it. */
const likeSchema = z
  .string()
  .refine((text) => {
    const parsed = parseNameParts(text);
    return 'parts' in parsed && parsed.parts.length === 2;
  }, 'must be schema.table, each part bare or in double quotes')
  .meta({
    description:
      'PostgreSQL driver: `schema.table` (parts as psql writes them), an existing table whose structure the new one copies; not with columns',
  });

export const createRequestSchema = z
  .strictObject({
    table: tableNameSchema,
    shards: z
      .number()
      .int()
      .min(1)
      .max(MAX_SHARDS)
      .meta({ description: `how many shards (pieces on the storage nodes): ${DEFAULT_SHARDS} by default, 1 with the postgres driver` })
      .default(DEFAULT_SHARDS),
    /** PostgreSQL driver: the columns, as inside `CREATE TABLE (...)`. */
    columns: columnsSchema.optional(),
    /** PostgreSQL driver: an existing table whose structure (indexes, defaults) the new one copies. */
    like: likeSchema.optional(),
  })
  .refine((r) => r.columns === undefined || r.like === undefined, { message: 'give columns or like, not both', path: ['like'] });

/**
 * PostgreSQL driver: register a table that exists already (`<schema>.<table>` on `node`, node-0 by default) as a READY
 * tablefate table of one shard, under its exact name (written as psql writes it: `shop."Orders"`).
 */
/** A storage node, by its name. */
const nodeSchema = z.string().regex(/^node-(0|[1-9][0-9]{0,1})$/, 'a storage node is node-<k>, k from 0');

export const adoptRequestSchema = z.strictObject({
  table: tableNameSchema,
  node: nodeSchema.meta({ description: 'the storage node the existing table is on' }).default('node-0'),
});

/**
 * PostgreSQL driver: how long a change waits for other sessions to let go of the table (1 s to an hour;
 * DEFAULT_DRAIN_TIMEOUT_SECONDS when absent) before it is TableBusy and taken back.
 */
const drainTimeoutSchema = (who: string) =>
  z
    .number()
    .int()
    .min(1)
    .max(MAX_DRAIN_TIMEOUT_SECONDS)
    .meta({ description: `seconds ${who} to let go of the table before it is TableBusy` })
    .optional();

export const trashRequestSchema = z
  .strictObject({
    /** The table dropped (or, with `together`, the first of those dropped as one); absent for a whole `namespace`. */
    table: tableNameSchema.optional(),
    /**
     * A whole namespace dropped as one, instead of `table`: every live table tablefate keeps in it, with their views (as
     * with cascade), and with PostgreSQL the schema itself with what else it holds (sequences, functions, types); a table
     * of the schema tablefate does not keep refuses it (adopt it first). A recall of any of them brings it all back.
     */
    namespace: namespaceSchema
      .meta({
        description:
          'instead of table: a whole namespace dropped as one: every live table tablefate keeps in it, with their views, and (postgres driver) the schema with what else it holds; a recall of any of them brings it all back',
        pattern: `^${IDENTIFIER_PART}$`,
      })
      .optional(),
    /** Seconds to keep the data in the trash (1 s to 10 years); the worker's default (7 days) when absent. */
    retentionSeconds: z
      .number()
      .int()
      .min(MIN_RETENTION_SECONDS)
      .max(MAX_RETENTION_SECONDS)
      .meta({ description: "seconds the trash keeps the table before it is purged; the deployment's setting when absent" })
      .optional(),
    drainTimeoutSeconds: drainTimeoutSchema('the drop waits for leases (and PostgreSQL sessions)'),
    /**
     * More live tables dropped with `table` as one operation (`drop a b c`): all of them go to the trash, or none; each
     * node moves its shards of them in one transaction (PostgreSQL: a foreign key between two of them does not refuse the
     * drop); a recall of any of them brings back those still in the trash from that drop.
     */
    together: z
      .array(tableNameSchema)
      .min(1)
      .max(MAX_TABLES_DROPPED_TOGETHER - 1)
      .meta({
        description: `more live tables dropped with table as one operation, all or none (at most ${MAX_TABLES_DROPPED_TOGETHER} in all); a recall of any of them brings back those still in the trash from that drop`,
      })
      .optional(),
    /**
     * PostgreSQL driver: with what depends on the table, as `DROP ... CASCADE` would drop it, but kept: its views and
     * materialized views move into the trash with it, live tables' foreign keys, policies and defaults on it are
     * detached, and a recall puts all of it back. Without it, a table anything depends on is HasDependents.
     */
    cascade: z
      .boolean()
      .meta({
        description:
          "PostgreSQL driver: with what depends on the table: its views move into the trash with it, live tables' foreign keys, policies and defaults on it are detached until its recall",
      })
      .optional(),
    /**
     * Says what a drop with the same request would do, and does nothing: no drop starts, no lock is taken. The answer is
     * the table as it is now, with `notes` saying what would move into the trash with it and what would be detached (with
     * `cascade`), or that nothing but its shards would move; a drop that would be refused is refused the same way
     * (TableNotFound, TableInTrash, HasDependents, ShardMissing).
     */
    dryRun: z
      .boolean()
      .meta({
        description:
          'say what a drop with the same request would do and do nothing: the table as it is now, its notes saying what would move into the trash with it and what would be detached; a drop that would be refused is refused the same way',
      })
      .optional(),
    /**
     * PostgreSQL driver: the storage node of a table tablefate does not keep yet, which the drop then adopts and trashes in
     * one operation (adopt's refusals apply). A table tablefate keeps is dropped as ever, wherever it is.
     */
    node: nodeSchema
      .meta({
        description:
          'PostgreSQL driver: the storage node of a table tablefate does not keep yet: it is adopted and dropped in one operation (a kept table is dropped as ever)',
      })
      .optional(),
  })
  .superRefine((request, ctx) => {
    if ((request.table === undefined) === (request.namespace === undefined))
      ctx.addIssue({ code: 'custom', message: 'give a table, or a whole namespace, to drop', path: ['table'] });
    else if (request.namespace !== undefined && (request.together || request.node !== undefined || request.dryRun))
      ctx.addIssue({ code: 'custom', message: 'a namespace is dropped whole: it takes no together, node or dryRun', path: ['namespace'] });
  });

const trashedTableRefSchema = tableRefSchema.meta({
  description: 'a table in the trash, by its id, or by its name (`<namespace>.<name>`): the most recently trashed table of that name',
});

export const undeleteRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: the most recently trashed table of that name. */
  table: trashedTableRefSchema,
  newName: tableNameSchema.meta({ description: 'the name it comes back under; the name it had when absent' }).optional(),
  /**
   * Instead of `newName`: the namespace it comes back into, under its own name; with the tables dropped with it as one,
   * each of them (PostgreSQL: a whole namespace's schema comes back under this name).
   */
  newNamespace: namespaceSchema
    .meta({
      description:
        "instead of newName: the namespace it comes back into under its own name, and so do the tables dropped with it as one (postgres driver: a whole namespace's schema comes back under this name)",
      pattern: `^${IDENTIFIER_PART}$`,
    })
    .optional(),
  /**
   * A table dropped with others as one (`droppedWith`) comes back with those of them still in the trash from that drop,
   * unless `alone`: then it comes back by itself, and what ties it to them (PostgreSQL: foreign keys) waits for their recall.
   */
  alone: z
    .boolean()
    .meta({
      description:
        'of a table dropped with others as one: recall it by itself (the others stay in the trash; foreign keys between them wait for their recall); without it, those still in the trash from that drop come back with it',
    })
    .optional(),
  /**
   * A truncate's entry (`truncatedFrom`) back in its table's place, under the table's name: the table, with the rows
   * written to it since the truncate, goes to the trash as a drop puts it (kept, recallable under a new name).
   */
  inPlace: z
    .boolean()
    .meta({
      description:
        "of a truncate's entry: back in its table's place, under its name; the table, with the rows written to it since the truncate, goes to the trash as a drop puts it (recallable)",
    })
    .optional(),
});

export const purgeRequestSchema = z.strictObject({ tableId: tableIdSchema });

export const renameRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: a live table. */
  table: tableRefSchema,
  newName: tableNameSchema,
  drainTimeoutSeconds: drainTimeoutSchema('the rename waits for PostgreSQL sessions'),
});

/**
 * A truncate into the trash: the table's rows become a trash entry of their own (recalled under a new name, held, purged,
 * expiring as a dropped table is); the table stays live and empty.
 */
export const truncateRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: a live table. */
  table: tableRefSchema,
  /** Seconds the trash keeps the rows (the bounds of a drop's retention); the deployment's setting when absent. */
  retentionSeconds: z
    .number()
    .int()
    .min(MIN_RETENTION_SECONDS)
    .max(MAX_RETENTION_SECONDS)
    .meta({ description: "seconds the trash keeps the truncated rows before they are purged; the deployment's setting when absent" })
    .optional(),
  drainTimeoutSeconds: drainTimeoutSchema('the truncate waits for leases (and PostgreSQL sessions)'),
  /**
   * PostgreSQL driver: as `TRUNCATE ... CASCADE`, the tables whose foreign keys reference it, and theirs in turn, are
   * truncated with it, each one's rows an entry of its own; one of them tablefate does not keep refuses the whole
   * truncate, named. Without it, a table another table's foreign key references is HasDependents (as PostgreSQL refuses it).
   */
  cascade: z
    .boolean()
    .meta({
      description:
        'PostgreSQL driver: as TRUNCATE ... CASCADE, the tables whose foreign keys reference it (and theirs in turn) are truncated with it, each into a trash entry of its own; one tablefate does not keep refuses the truncate, named',
    })
    .optional(),
});

/** Free text a person gives (a hold's reason, a lease's holder): printable, on one line. */
const noteSchema = (what: string, max: number) =>
  z
    .string()
    .min(1, `${what} must not be empty`)
    .max(max, `${what} is at most ${max} characters`)
    // eslint-disable-next-line no-control-regex -- control characters are exactly what it refuses
    .regex(/^[^\u0000-\u001f\u007f]*$/, `${what} must be one line of printable text`);

export const holdRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: a live table (a trashed one by its id). */
  table: tableRefSchema.meta({
    description:
      'a live table by its id or name (`<namespace>.<name>`), or a trashed one by its id (or its name: the most recently trashed)',
  }),
  /** Why it is held (a case number, a ticket): shown by describe and ls, and named by the purge it refuses. */
  reason: noteSchema('a reason', 500)
    .meta({ description: 'why it is held (a case number, a ticket): one line of printable text' })
    .optional(),
});

export const releaseRequestSchema = z.strictObject({ table: tableRefSchema });

/** A trashed table's new retention, counted from its drop time (the bounds of a drop's). */
export const retentionRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: the most recently trashed table of that name. */
  table: trashedTableRefSchema,
  retentionSeconds: z.number().int().min(MIN_RETENTION_SECONDS).max(MAX_RETENTION_SECONDS).meta({
    description: 'the new retention in seconds, counted from the drop: an expiry already past purges the table now (unless it is held)',
  }),
});

const leaseIdSchema = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'a lease id is the uuid its acquire printed')
  .meta({ description: 'a lease id: the uuid acquireLease answered' });
const ttlSchema = z
  .number()
  .int()
  .min(1)
  .max(MAX_LEASE_TTL_SECONDS)
  .meta({ description: 'seconds the lease holds from now, unless renewed' });

export const leaseRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: a READY table. */
  table: tableRefSchema,
  ttlSeconds: ttlSchema.default(DEFAULT_LEASE_TTL_SECONDS),
  /** Who holds it, named by a drop that waits for it (`user@host` by default). */
  holder: noteSchema('a holder', 200)
    .meta({
      description: 'who holds it, as a drop that waits for it names it; by default who asks (a contract call: its workflow type and id)',
    })
    .optional(),
});

export const renewLeaseRequestSchema = z.strictObject({
  leaseId: leaseIdSchema,
  ttlSeconds: ttlSchema.meta({ description: "seconds the lease holds from now; the lease's own ttlSeconds when absent" }).optional(),
});
export const releaseLeaseRequestSchema = z.strictObject({ leaseId: leaseIdSchema });
export const listLeasesRequestSchema = z.strictObject({ table: tableRefSchema.optional() });

const settingNamespaceSchema = namespaceSchema.meta({
  description: 'the namespace whose own value is meant (bare, or in double quotes as psql writes it); the global value when absent',
  pattern: `^${IDENTIFIER_PART}$`,
});
const settingKeySchema = z
  .string()
  .meta({ description: 'a runtime setting', enum: [...SETTING_KEYS] })
  .superRefine((key, ctx) => {
    if (!isSettingKey(key))
      ctx.addIssue({ code: 'custom', message: `no setting "${key}": a setting is one of ${SETTING_KEYS.join(', ')}` });
  })
  .transform((key) => key as SettingKey);

/** `config get [key]`: one key or all, as they apply globally or in a namespace. */
export const configGetRequestSchema = z.strictObject({
  key: settingKeySchema.optional(),
  namespace: settingNamespaceSchema.optional(),
});

/** `config set <key> <value>`: the value as typed, checked for its key. */
export const configSetRequestSchema = z
  .strictObject({
    key: settingKeySchema,
    value: z.string().meta({
      description:
        'the value as text: true or false (trash.enabled), whole seconds (trash.retentionSeconds), whole bytes or unlimited (trash.maxBytes)',
      examples: ['86400'],
    }),
    namespace: settingNamespaceSchema.optional(),
  })
  .transform((r, ctx): { key: SettingKey; value: SettingValue; namespace?: string } => {
    const parsed = parseSettingValue(r.key, r.value);
    if ('refused' in parsed) {
      ctx.addIssue({ code: 'custom', message: parsed.refused, path: ['value'] });
      return z.NEVER;
    }
    return { key: r.key, value: parsed.value, namespace: r.namespace };
  });

export const configUnsetRequestSchema = z.strictObject({ key: settingKeySchema, namespace: settingNamespaceSchema.optional() });

/** Purge every trashed table that is not held (of one namespace), a few at a time. */
export const purgeAllRequestSchema = z.strictObject({
  namespace: namespaceSchema.optional(),
  concurrency: z.number().int().min(1).max(16).default(4),
});

/**
 * Each table operation's request schema, linked to its record (OPERATIONS in domain/operations.ts) by the operation's
 * name. Kept apart from the records because workflow code imports those, and must not load the validation library.
 */
export const OPERATION_REQUESTS = {
  create: createRequestSchema,
  adopt: adoptRequestSchema,
  trash: trashRequestSchema,
  // (Asked as a drop with its node named, of a table tablefate does not keep yet.)
  adoptTrash: trashRequestSchema,
  truncate: truncateRequestSchema,
  undelete: undeleteRequestSchema,
  // (Asked as a recall of a truncate's entry with inPlace.)
  recallInPlace: undeleteRequestSchema,
  purge: purgeRequestSchema,
  rename: renameRequestSchema,
  hold: holdRequestSchema,
  release: releaseRequestSchema,
  lease: leaseRequestSchema,
} as const satisfies Record<TableOp, z.ZodType>;

const withSizesSchema = z
  .boolean()
  .meta({ description: 'ask the storage nodes how many bytes each table takes (bytes: null where a node did not answer)' })
  .default(false);

/** A page of a listing: the tables after id `after`, at most `limit` of them (all, without it). */
export const listRequestSchema = z.strictObject({
  includeTrashed: z.boolean().meta({ description: 'the trashed tables too' }).default(false),
  after: tableIdSchema.meta({ description: 'the tables after this id (the last id of the previous page)' }).optional(),
  limit: z
    .number()
    .int('a limit is a whole number')
    .min(1)
    .max(MAX_LIST_LIMIT)
    .meta({ description: 'at most this many tables; all when absent' })
    .optional(),
  /** Ask the storage nodes how big each table is (`bytes`), instead of reading the catalog alone. */
  withSizes: withSizesSchema,
});

export const describeRequestSchema = z.strictObject({ table: tableRefSchema, withSizes: withSizesSchema });

/** The most runs `operations` lists at once, and how many without a limit: the newest first. */
export const MAX_OPERATIONS_LIMIT = 1000;
export const DEFAULT_OPERATIONS_LIMIT = 50;

/** Operations, newest first: of one table (by id any, tombstones included; by name the live or most recently trashed). */
export const operationsRequestSchema = z.strictObject({
  table: tableRefSchema.optional(),
  /** Only the runs still running. */
  running: z.boolean().default(false),
  limit: z.number().int('a limit is a whole number').min(1).max(MAX_OPERATIONS_LIMIT).default(DEFAULT_OPERATIONS_LIMIT),
});

/** One table's life: every operation on it (by id any table, a purged one included; by name the live or most recently trashed). */
export const historyRequestSchema = z.strictObject({ table: tableRefSchema });

/** A running operation to cancel, by the workflow id `operations` lists (`drop:12@<catalog>`). */
export const cancelRequestSchema = z.strictObject({
  workflowId: z
    .string()
    .min(1, 'a workflow id must not be empty')
    .max(1000, 'a workflow id is at most 1000 characters')
    .regex(/^[^\s]+$/, 'a workflow id has no spaces; copy it from `tablefate ops`'),
});

/** Who starts the operations a client starts (TableFateClientOptions.identity), recorded in each run's memo. */
export const identitySchema = noteSchema('an identity', 200);

/** How a workflow paces a try it repeats (see Backoff): whole milliseconds, at least one try per run. */
export const backoffSchema = z
  .strictObject({
    firstMs: z.number().int().min(1).max(3_600_000),
    maxMs: z.number().int().min(1).max(3_600_000),
    attemptsPerRun: z.number().int().min(1).max(1000),
  })
  .refine((p) => p.maxMs >= p.firstMs, { message: 'maxMs must be at least firstMs' });

export type CreateRequest = z.input<typeof createRequestSchema>;
export type AdoptRequest = z.input<typeof adoptRequestSchema>;
export type TrashRequest = z.input<typeof trashRequestSchema>;
export type TruncateRequest = z.input<typeof truncateRequestSchema>;
export type UndeleteRequest = z.input<typeof undeleteRequestSchema>;
export type PurgeRequest = z.input<typeof purgeRequestSchema>;
export type RenameRequest = z.input<typeof renameRequestSchema>;
export type ListRequest = z.input<typeof listRequestSchema>;
export type HoldRequest = z.input<typeof holdRequestSchema>;
export type ReleaseRequest = z.input<typeof releaseRequestSchema>;
export type RetentionRequest = z.input<typeof retentionRequestSchema>;
export type LeaseRequest = z.input<typeof leaseRequestSchema>;
export type RenewLeaseRequest = z.input<typeof renewLeaseRequestSchema>;
export type ReleaseLeaseRequest = z.input<typeof releaseLeaseRequestSchema>;
export type ListLeasesRequest = z.input<typeof listLeasesRequestSchema>;
export type ConfigGetRequest = z.input<typeof configGetRequestSchema>;
export type ConfigSetRequest = z.input<typeof configSetRequestSchema>;
export type ConfigUnsetRequest = z.input<typeof configUnsetRequestSchema>;
export type PurgeAllRequest = z.input<typeof purgeAllRequestSchema>;
export type DescribeRequest = z.input<typeof describeRequestSchema>;
export type OperationsRequest = z.input<typeof operationsRequestSchema>;
export type HistoryRequest = z.input<typeof historyRequestSchema>;
export type CancelRequest = z.input<typeof cancelRequestSchema>;

/** Parses a request or throws InvalidInput naming every problem, with the field it concerns. */
export function parseRequest<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    const field = issue.path.join('.');
    return field ? `${field}: ${issue.message}` : issue.message;
  });
  throw new InvalidInputError(problems.join('; '));
}
