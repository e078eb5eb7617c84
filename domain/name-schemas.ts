import { z } from 'zod';
import { DEFAULT_NAMESPACE, parseNameParts, type TableName, type TableRef } from './names';

/**
 * How a table, a table id and a namespace are read where they enter tablefate (domain/requests.ts): as psql writes
 * them, parsed into their parts once, with JSON Schema's picture of each for callers in other languages.
 */

/** A name part, bare or quoted, as JSON Schema can say it (the transforms, with parseNameParts, judge the 63 bytes). */
export const IDENTIFIER_PART = '(?:[a-z_\\u0080-\\uffff][a-z0-9_$\\u0080-\\uffff]{0,62}|"(?:[^"\\u0000-\\u001f\\u007f]|""){1,63}")';

/*
 * The .meta() below describe, for a caller in another language (the contract's JSON Schema, contract/document.ts), what
 * the transforms check in code and JSON Schema cannot see: a transform's input is a plain string or number there. Each
 * pattern accepts at least what the transform accepts, and is checked against it (test/unit/contract-document.test.ts);
 * the transform stays the judge, with its own messages.
 */
const TABLE_NAME_PATTERN = `(?:${IDENTIFIER_PART}\\.)?${IDENTIFIER_PART}`;
/** Decimal digits of a positive whole number (a table id given as text). */
const TABLE_ID_DIGITS_PATTERN = '0*[1-9][0-9]*';
const tableIdNumberJsonSchema = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER };

/** `<ns>.<name>` or `<name>` (namespace `default`), parsed into its parts. */
export const tableNameSchema = z
  .string()
  .meta({
    description:
      'a table name: `<namespace>.<name>`, or `<name>` in namespace `default`, each part as psql writes it: bare (a-z, 0-9 and _, ' +
      'starting with a letter) or in double quotes (any printable characters, a quote doubled: `shop."Orders"`), 1 to 63 bytes',
    pattern: `^${TABLE_NAME_PATTERN}$`,
    examples: ['shop.orders', 'shop."Orders"'],
  })
  .transform((text, ctx): TableName => {
    const parsed = parseNameParts(text);
    if ('error' in parsed || parsed.parts.length > 2) {
      const message = 'error' in parsed ? parsed.error : `"${text}" has more than one "." outside quotes; expected <namespace>.<name>`;
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    }
    const { parts } = parsed;
    return parts.length === 2 ? { namespace: parts[0]!, name: parts[1]! } : { namespace: DEFAULT_NAMESPACE, name: parts[0]! };
  });

const positiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/**
 * A table id: a positive integer from the catalog's counter, as a number or as decimal digits. Nothing looser
 * (`0x10`, `1e3`, ` 5`): an id picks the table a purge destroys.
 */
export const tableIdSchema = z
  .union([z.number(), z.string()])
  .meta({
    description: 'a table id: a positive whole number (or its decimal digits as a string), as create answered it and describe shows it',
    anyOf: [tableIdNumberJsonSchema, { type: 'string', pattern: `^${TABLE_ID_DIGITS_PATTERN}$` }],
    examples: [42],
  })
  .transform((value, ctx): number => {
    const id = typeof value === 'number' ? value : /^[0-9]+$/.test(value) ? Number(value) : NaN;
    if (!positiveId.safeParse(id).success) {
      // One message for every wrong shape: a purge given a name must say that it wants an id, and where to find one.
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)} is not a table id: a table id is a positive whole number (ls -a and describe show it)`,
      });
      return z.NEVER;
    }
    return id;
  });

/** What a person typed to name a table: an id or a name (see TableRef). */
export const tableRefSchema = z
  .union([z.number(), z.string()])
  .meta({
    description:
      'a table, by its id (a positive whole number, or its digits as a string) or by its name (`<namespace>.<name>`, or `<name>` in namespace `default`)',
    anyOf: [tableIdNumberJsonSchema, { type: 'string', pattern: `^(?:${TABLE_ID_DIGITS_PATTERN}|${TABLE_NAME_PATTERN})$` }],
    examples: ['shop.orders', 42],
  })
  .transform((value, ctx): TableRef => {
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

/** A namespace: one name part, bare or quoted. */
export const namespaceSchema = z.string().transform((text, ctx) => {
  const parsed = parseNameParts(text);
  if ('parts' in parsed && parsed.parts.length === 1) return parsed.parts[0]!;
  ctx.addIssue({ code: 'custom', message: 'error' in parsed ? parsed.error : `a namespace is one name, not "${text}"` });
  return z.NEVER;
});
