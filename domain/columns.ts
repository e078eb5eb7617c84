/**
 * Column definitions, as a user writes them inside `CREATE TABLE t (...)` for the PostgreSQL storage driver: the only
 * SQL text tablefate ever takes from a user. It is placed between the parentheses of one CREATE TABLE statement, so
 * it must be that and nothing more: no way out of the parentheses (a `)` that closes what it did not open), no
 * second statement (`;`), no comment that could hide the rest of the statement, no dollar quoting (whose tags make
 * the text's extent depend on more than this scan). Quoted strings and identifiers may hold any of those
 * characters. What the definitions mean (types, defaults, constraints) PostgreSQL itself checks when the table is
 * made; this check only guarantees the text cannot make anything but that one table. (It reads strings as PostgreSQL
 * does with `standard_conforming_strings` on, the default since 9.1: the driver sets it for its sessions, and runs the
 * statement through the extended protocol, which refuses a second statement on its own.)
 */

/** Longer definitions than this are refused: a table of some thousand columns still fits. */
export const MAX_COLUMN_DEFINITIONS_LENGTH = 65_536;

export type ColumnCheck = { ok: true } | { ok: false; reason: string };

/** Whether `text` is a list of column definitions that stays inside its parentheses (see above). */
export function checkColumnDefinitions(text: string): ColumnCheck {
  if (text.trim() === '') return refuse('are empty');
  if (text.length > MAX_COLUMN_DEFINITIONS_LENGTH) return refuse(`are longer than ${MAX_COLUMN_DEFINITIONS_LENGTH} characters`);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'") {
      // An E'...' string takes backslash escapes; any other doubles its quote.
      const escapes = /[eE]/.test(text[i - 1] ?? '') && !/[\w$]/.test(text[i - 2] ?? '');
      const end = closingQuote(text, i, "'", escapes);
      if (end < 0) return refuse(`have a string opened at character ${i + 1} and never closed`);
      i = end;
    } else if (c === '"') {
      const end = closingQuote(text, i, '"', false);
      if (end < 0) return refuse(`have a quoted name opened at character ${i + 1} and never closed`);
      i = end;
    } else if (c === '(') {
      depth++;
    } else if (c === ')') {
      if (--depth < 0) return refuse(`close a parenthesis they did not open, at character ${i + 1}`);
    } else if (c === ';') {
      return refuse(`hold a ";" at character ${i + 1}: one table's columns, not statements`);
    } else if ((c === '-' && text[i + 1] === '-') || (c === '/' && text[i + 1] === '*')) {
      return refuse(`hold a comment at character ${i + 1}`);
    } else if (c === '$') {
      return refuse(`hold a "$" at character ${i + 1} (dollar quoting is not accepted: use '...')`);
    } else if (c === '\0') {
      return refuse(`hold a NUL character at character ${i + 1}`);
    }
  }
  if (depth > 0) return refuse('leave a parenthesis open');
  return { ok: true };
}

/** The index of the quote that closes the one at `open`, or -1. A doubled quote (and, with `escapes`, \') is inside. */
function closingQuote(text: string, open: number, quote: string, escapes: boolean): number {
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i];
    if (escapes && c === '\\') {
      i++;
    } else if (c === quote) {
      if (text[i + 1] === quote) i++;
      else return i;
    } else if (c === '\0') {
      return -1;
    }
  }
  return -1;
}

const refuse = (why: string): ColumnCheck => ({ ok: false, reason: `the column definitions ${why}` });
