import { z } from 'zod';

/** The namespace a bare table name belongs to. */
export const DEFAULT_NAMESPACE = 'default';

const IDENTIFIER = /^[a-z][a-z0-9_]{0,62}$/;

export interface TableName {
  namespace: string;
  name: string;
}

/** `<ns>.<name>` or `<name>` (namespace `default`), parsed into its parts. */
export const tableNameSchema = z
  .string()
  .transform((text, ctx): TableName => {
    const parts = text.split('.');
    if (parts.length > 2) {
      ctx.addIssue({ code: 'custom', message: `"${text}" has more than one "."; expected <namespace>.<name>` });
      return z.NEVER;
    }
    const [namespace, name] = parts.length === 2 ? [parts[0]!, parts[1]!] : [DEFAULT_NAMESPACE, parts[0]!];
    for (const [label, value] of [['namespace', namespace], ['name', name]] as const) {
      if (!IDENTIFIER.test(value)) {
        ctx.addIssue({
          code: 'custom',
          message: `${label} "${value}" must be 1 to 63 characters of a-z, 0-9 and _, starting with a letter`,
        });
        return z.NEVER;
      }
    }
    return { namespace, name };
  });

export function formatTableName(table: TableName): string {
  return `${table.namespace}.${table.name}`;
}

const positiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/**
 * A table id: a positive integer from the catalog's counter, as a number or as decimal digits. Nothing looser
 * (`0x10`, `1e3`, ` 5`): an id picks the table a purge destroys.
 */
export const tableIdSchema = z.union([
  positiveId,
  z
    .string()
    .regex(/^[0-9]+$/, 'a table id is a positive whole number')
    .transform(Number)
    .pipe(positiveId),
]);

/**
 * A reference to a table as a person types it: a number is an id, anything else a name.
 * Ids and names cannot be confused because a name part must start with a letter.
 */
export type TableRef = { kind: 'id'; id: number } | ({ kind: 'name' } & TableName);

export const tableRefSchema = z.union([z.number(), z.string()]).transform((value, ctx): TableRef => {
  if (typeof value === 'number' || /^[0-9]+$/.test(value)) {
    // Digits only: a name part must start with a letter, so this cannot be a name.
    const id = tableIdSchema.safeParse(value);
    if (!id.success) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a valid table id` });
      return z.NEVER;
    }
    return { kind: 'id', id: id.data };
  }
  const name = tableNameSchema.safeParse(value);
  if (!name.success) {
    for (const issue of name.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
    return z.NEVER;
  }
  return { kind: 'name', ...name.data };
});
