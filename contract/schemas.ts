import { z } from 'zod';
import type { LeaseInfo } from '../domain/leases';
import { SETTING_KEYS, type EffectiveSetting } from '../domain/settings';
import { TABLE_STATES } from '../domain/states';
import type { TableInfo } from '../domain/table';

/**
 * The contract's answers as zod schemas (contract/document.ts publishes them as JSON Schema): what a caller in another
 * language reads back. The SDK's types are the truth; each schema is checked against its type below, so that neither
 * can change without the other.
 */

/** The SDK's times, as `Date.toISOString()` writes them. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const isoTime = z
  .string()
  .refine((text) => ISO_TIME.test(text) && !Number.isNaN(Date.parse(text)), 'an ISO-8601 time in UTC, as 2026-05-04T09:30:00.000Z')
  .meta({ format: 'date-time' });

const tableId = z.number().int().positive().describe("the table's id: an integer from the catalog's counter, never reused");

export const tableInfoSchema = z
  .object({
    id: tableId,
    namespace: z.string().describe('the namespace part of its name (with the postgres driver, the schema it lives in)'),
    name: z.string().describe('the name part of its name; a trashed table keeps the name it had'),
    state: z
      .enum(TABLE_STATES)
      .describe(
        'READY: usable; TRASHED: in the trash, data whole, until expireAt; PURGED: deleted for good (a tombstone). ' +
          'The others are an operation under way (CREATING, DRAINING, TRASHING, RESTORING, PURGING) or a create taken back (CREATE_FAILED)',
      ),
    shards: z.number().int().positive().describe('how many shards (pieces on the storage nodes) it has'),
    placement: z
      .array(
        z.object({
          shard: z.number().int().nonnegative().describe('the shard, from 0'),
          node: z.string().describe('the storage node it is on: node-<k>'),
        }),
      )
      .describe('where each shard is'),
    createdAt: isoTime.describe('when it was created'),
    droppedAt: isoTime.nullable().describe('when it was trashed; null unless it is in the trash (or was, for a purged table)'),
    droppedBy: z
      .string()
      .nullable()
      .describe(
        'who trashed it: the identity of the client that started the drop (user@host by default); null unless it is in the trash ' +
          '(or was, for a purged table), and null when the drop did not say (one made before tablefate recorded it)',
      ),
    expireAt: isoTime.nullable().describe("when the trash's timer purges it; null unless it is in the trash"),
    purgedAt: isoTime.nullable().describe('when it was purged; null unless PURGED'),
    hold: z
      .object({
        reason: z.string().nullable().describe('why it is held, as given; null when none was given'),
        since: isoTime.describe('when the hold was placed'),
      })
      .nullable()
      .describe('the legal hold on it, if any (null: none): while held it is never purged'),
    bytes: z
      .number()
      .int()
      .nonnegative()
      .nullable()
      .optional()
      .describe(
        'only when the call asked withSizes: the bytes its shards take (0 once purged); null when a node holding one did not answer',
      ),
    family: z
      .array(z.string())
      .optional()
      .describe(
        'what its drop took along (postgres driver, with cascade), a sentence each: the views moved into the trash with it, and what live tables had on it, detached until its recall; absent when nothing, and once it is back',
      ),
    droppedWith: z
      .array(z.number().int().positive())
      .optional()
      .describe(
        'the ids of the other tables dropped with it as one (a drop of several tables): a recall of it recalls those still in the trash from that drop with it, unless asked for it alone; absent when it was dropped alone, and once it is back',
      ),
    truncatedFrom: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        'a trash entry a truncate made: the id of the table whose rows it holds, which stayed live (empty) under the same name; absent otherwise',
      ),
    notes: z
      .array(z.string())
      .optional()
      .describe(
        'what the operation could not do as the table had it, a sentence each (a recall with the postgres driver); absent when nothing',
      ),
  })
  .meta({ title: 'TableInfo', description: 'a table, as the catalog has it once the call is done' });

export const leaseInfoSchema = z
  .object({
    id: z.uuid().describe('the lease id: what renewLease and releaseLease take'),
    tableId: tableId.describe('the table it holds'),
    holder: z.string().describe('who holds it: named by a drop that waits for it'),
    ttlSeconds: z.number().int().positive().describe('how long it holds from its last acquire or renewal, in seconds'),
    acquiredAt: isoTime.describe('when it was taken'),
    expiresAt: isoTime.describe('when it stops holding the table, unless renewed before'),
  })
  .meta({
    title: 'LeaseInfo',
    description: 'a lease on a table: while it holds, a drop of the table waits for it (up to its drain timeout)',
  });

export const effectiveSettingSchema = z
  .object({
    key: z.enum(SETTING_KEYS).describe('the setting'),
    value: z
      .union([z.boolean(), z.number().int().nonnegative(), z.null()])
      .describe('trash.enabled: a boolean; trash.retentionSeconds: whole seconds; trash.maxBytes: whole bytes, or null for no cap'),
    source: z
      .enum(['namespace', 'global', 'default'])
      .describe("where the value in force comes from: the namespace's own, the global one, or the default"),
    namespace: z.string().nullable().describe('the namespace asked about; null when the global value was asked'),
  })
  .meta({ title: 'EffectiveSetting', description: 'a runtime setting, as it applies' });

/** True when A and B are the same type (not merely assignable one way: an optional field missing on one side counts). */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const sameType = <A, B>(same: Equal<A, B>): Equal<A, B> => same;

// A schema that drifts from the SDK's type fails to compile here, before any caller sees the difference.
sameType<z.infer<typeof tableInfoSchema>, TableInfo>(true);
sameType<z.infer<typeof leaseInfoSchema>, LeaseInfo>(true);
sameType<z.infer<typeof effectiveSettingSchema>, EffectiveSetting>(true);
