import { z } from 'zod';
import { tableIdSchema, tableNameSchema, tableRefSchema } from './names';
import { InvalidInputError } from './errors';
import { MAX_LIST_LIMIT, MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS } from './limits';

/** The most shards a table may have. */
export const MAX_SHARDS = 256;
export const DEFAULT_SHARDS = 4;

/** The requests the SDK accepts. Everything entering tablefate passes one of these, once, at the edge. */
export const createRequestSchema = z.strictObject({
  table: tableNameSchema,
  shards: z.number().int().min(1).max(MAX_SHARDS).default(DEFAULT_SHARDS),
});

export const trashRequestSchema = z.strictObject({
  table: tableNameSchema,
  /** Seconds to keep the data in the trash (1 s to 10 years); the worker's default (7 days) when absent. */
  retentionSeconds: z.number().int().min(MIN_RETENTION_SECONDS).max(MAX_RETENTION_SECONDS).optional(),
});

export const undeleteRequestSchema = z.strictObject({
  /** An id, or `<ns>.<name>`: the most recently trashed table of that name. */
  table: tableRefSchema,
  newName: tableNameSchema.optional(),
});

export const purgeRequestSchema = z.strictObject({ tableId: tableIdSchema });

/** A page of a listing: the tables after id `after`, at most `limit` of them (all, without it). */
export const listRequestSchema = z.strictObject({
  includeTrashed: z.boolean().default(false),
  after: tableIdSchema.optional(),
  limit: z.number().int('a limit is a whole number').min(1).max(MAX_LIST_LIMIT).optional(),
});

export const describeRequestSchema = z.strictObject({ table: tableRefSchema });

/** How operations wait for a busy table (see LockWaitPolicy): whole milliseconds, at least one try per run. */
export const lockWaitSchema = z
  .strictObject({
    firstMs: z.number().int().min(1).max(3_600_000),
    maxMs: z.number().int().min(1).max(3_600_000),
    attemptsPerRun: z.number().int().min(1).max(1000),
  })
  .refine((p) => p.maxMs >= p.firstMs, { message: 'maxMs must be at least firstMs' });

export type CreateRequest = z.input<typeof createRequestSchema>;
export type TrashRequest = z.input<typeof trashRequestSchema>;
export type UndeleteRequest = z.input<typeof undeleteRequestSchema>;
export type PurgeRequest = z.input<typeof purgeRequestSchema>;
export type ListRequest = z.input<typeof listRequestSchema>;
export type DescribeRequest = z.input<typeof describeRequestSchema>;

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
