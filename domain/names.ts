/**
 * Table names and references, as plain data: workflow code uses them too, so this module stays free of the
 * validation library (its schemas, in domain/requests.ts, would otherwise be evaluated again for every run a
 * worker holds in memory).
 */

/** The namespace a bare table name belongs to. */
export const DEFAULT_NAMESPACE = 'default';

export interface TableName {
  namespace: string;
  name: string;
}

/**
 * The name a shard's table has while it is live (PostgreSQL driver): the table's own for a table of one shard,
 * `<name>_<shard>` for each of several, in the schema named after the namespace.
 */
export function liveShardName(table: TableName & { shards: number }, shard: number): { schema: string; table: string } {
  return { schema: table.namespace, table: table.shards === 1 ? table.name : `${table.name}_${shard}` };
}

/** A name part that needs no quotes: what psql writes bare, as every tablefate name once had to be. */
const PLAIN_PART = /^[a-z][a-z0-9_]*$/;
/**
 * What psql reads bare as itself: a letter or `_`, then letters, digits, `_` and `$`, where a letter is a-z or any
 * letter beyond ASCII (PostgreSQL folds ASCII capitals only). ASCII capitals are refused, below, rather than folded.
 */
const BARE_PART = /^[a-z_\u0080-\u{10ffff}][a-z0-9_$\u0080-\u{10ffff}]*$/u;
/** PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1): it cuts a longer one short without a word. */
export const MAX_NAME_BYTES = 63;

/** A name part as psql writes it: bare when plain, else in double quotes, a quote inside it doubled. */
export function quotePart(part: string): string {
  return PLAIN_PART.test(part) ? part : `"${part.replace(/"/g, '""')}"`;
}

/**
 * `<ns>.<name>`, each part as psql writes it (`shop.orders`, `shop."Orders"`, `"my.app".orders`): how a table's name is
 * written everywhere (ids of create runs, locks, messages). One name has one spelling, and two names never share one.
 */
export function formatTableName(table: TableName): string {
  return `${quotePart(table.namespace)}.${quotePart(table.name)}`;
}

/**
 * The parts of a dotted name as psql reads them, each bare (`orders`, `ördérs`: letters, digits, _ and $, starting with a
 * letter or _) or in
 * double quotes (`"Orders"`, `"order ""2025"""`: anything printable, a quote doubled), 1 to 63 bytes each. Answers the
 * parts, or why the text is not such a name. A bare part with capitals is refused rather than folded to lower case as
 * PostgreSQL would: the table it means is the quoted one as often as not, and a drop must not guess.
 */
export function parseNameParts(text: string): { parts: string[] } | { error: string } {
  const parts: string[] = [];
  let at = 0;
  for (;;) {
    const read = text[at] === '"' ? quotedAt(text, at) : bareAt(text, at);
    if ('error' in read) return read;
    const { part } = read;
    at = read.end;
    if (new TextEncoder().encode(part).length > MAX_NAME_BYTES)
      return { error: `${quotePart(part)} is over PostgreSQL's ${MAX_NAME_BYTES} bytes` };
    parts.push(part);
    if (at === text.length) return { parts };
    if (text[at] !== '.') return { error: `"${text}": expected "." after ${quotePart(part)}` };
    at++;
    if (at === text.length) return { error: `"${text}" ends with "."` };
  }
}

/** The quoted part that starts at `at`, and where it ends. */
function quotedAt(text: string, at: number): { part: string; end: number } | { error: string } {
  let part = '';
  let end = at + 1;
  for (;;) {
    if (end >= text.length) return { error: `"${text}" has a quote that is not closed` };
    if (text[end] === '"') {
      if (text[end + 1] !== '"') break;
      part += '"';
      end += 2;
      continue;
    }
    part += text[end];
    end++;
  }
  if (part === '') return { error: `"${text}" has an empty quoted name ("")` };
  // eslint-disable-next-line no-control-regex -- control characters are exactly what it refuses
  if (/[\u0000-\u001f\u007f]/.test(part)) return { error: `a name in "${text}" has a control character` };
  return { part, end: end + 1 };
}

/** The bare part that starts at `at`, and where it ends. */
function bareAt(text: string, at: number): { part: string; end: number } | { error: string } {
  let end = at;
  while (end < text.length && text[end] !== '.' && text[end] !== '"') end++;
  const part = text.slice(at, end);
  if (BARE_PART.test(part)) return { part, end };
  if (/^[A-Za-z][A-Za-z0-9_]*$/.test(part)) {
    return { error: `"${part}" has capitals: write "${part}" in double quotes for that very name, or ${part.toLowerCase()}` };
  }
  if (part === '') return { error: `"${text}" has an empty name part` };
  return { error: `"${part}" must be a-z, 0-9 and _, starting with a letter, or be written in double quotes` };
}

/**
 * A reference to a table as a person types it: a number is an id, anything else a name.
 * Ids and names cannot be confused because a bare name part starts with a letter (a name of digits is written in quotes).
 */
export type TableRef = { kind: 'id'; id: number } | ({ kind: 'name' } & TableName);
