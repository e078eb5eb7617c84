/**
 * Column definitions, as a user writes them inside `CREATE TABLE t (...)` for the PostgreSQL storage driver: the only
 * SQL text tablefate ever takes from a user. It is placed between the parentheses of one CREATE TABLE statement, so
 * it must be that and nothing more: no way out of the parentheses (a `)` that closes what it did not open), no
 * second statement (`;`), no comment that could hide the rest of the statement, no dollar quoting (whose tags make
 * the text's extent depend on more than this scan). Quoted strings and identifiers may hold any of those
 * characters.
 *
 * The scan must find each string where PostgreSQL's lexer (scan.l) finds it, and where the two could differ it
 * refuses rather than guess:
 * - A string that follows a letter, digit, `_`, `$` or any non-ASCII character with no space between is refused:
 *   whether a letter there makes it an escape string depends on the token the letter ends, which is not always what
 *   it looks like (PostgreSQL's names take non-ASCII letters, so `éE'..'` is a name and a standard string; `1E'..'`
 *   is an error since PostgreSQL 15, a number and an escape string before). Only a lone `E`, `B`, `X` or `N` may
 *   prefix a string, and only `E` changes how it reads (backslash escapes; `B'..'` and `X'..'` end at a doubled
 *   quote and start another string there, which covers the same text). `U&'..'` and `U&".."` read as plain strings
 *   and names do: their escapes are decoded after the lexer has found their end.
 * - A string followed by a line break and another quote is refused: PostgreSQL joins the two into one string of the
 *   first one's kind, so an `E'..'` continued that way would read the second part with backslash escapes.
 * - `--` and `/*` anywhere outside quotes are refused: PostgreSQL ends an operator where either begins, and nests
 *   block comments.
 *
 * What the definitions mean (types, defaults, constraints) PostgreSQL itself checks when the table is made; this
 * check only guarantees the text cannot make anything but that one table. (It reads strings as PostgreSQL does with
 * `standard_conforming_strings` on, the default since 9.1: the driver sets it for its sessions, and runs the
 * statement through the extended protocol, which refuses a second statement on its own.)
 */

/** Longer definitions than this are refused: a table of some thousand columns still fits. */
export const MAX_COLUMN_DEFINITIONS_LENGTH = 65_536;

export type ColumnCheck = { ok: true } | { ok: false; reason: string };

/** Whether `text` is a list of column definitions that stays inside its parentheses (see above). */
export function checkColumnDefinitions(text: string): ColumnCheck {
  if (text.trim() === '') return refuse('are empty');
  if (text.length > MAX_COLUMN_DEFINITIONS_LENGTH) return refuse(`are longer than ${MAX_COLUMN_DEFINITIONS_LENGTH} characters`);
  // Not even inside quotes: the server reads the statement as a C string, which would end there.
  const nul = text.indexOf('\0');
  if (nul >= 0) return refuse(`hold a NUL character at character ${nul + 1}`);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'") {
      const prefix = wordBefore(text, i);
      if (prefix !== '' && !STRING_PREFIXES.has(prefix)) {
        return refuse(`have a string right after "${prefix}", at character ${i + 1} (put a space before the quote)`);
      }
      const end = closingQuote(text, i, "'", prefix === 'e' || prefix === 'E');
      if (end < 0) return refuse(`have a string opened at character ${i + 1} and never closed`);
      const continued = continuation(text, end);
      if (continued >= 0) {
        return refuse(
          `have a string continued on another line at character ${continued + 1} (PostgreSQL joins it to the string before: write one string)`,
        );
      }
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
    }
  }
  if (depth > 0) return refuse('leave a parenthesis open');
  return { ok: true };
}

/** What may stand right before a string's opening quote: a lone letter that PostgreSQL reads as the string's kind. */
const STRING_PREFIXES = new Set(['e', 'E', 'b', 'B', 'x', 'X', 'n', 'N']);

/**
 * A character PostgreSQL's lexer may take into a name or a number: its identifiers hold bytes 0x80-0xFF (every
 * non-ASCII character, in UTF-8), digits and `$` after the first.
 */
const isWordChar = (c: string) => /[A-Za-z0-9_$]/.test(c) || c.charCodeAt(0) >= 0x80;

/** The run of name or number characters that ends right before `at`. */
function wordBefore(text: string, at: number): string {
  let start = at;
  while (start > 0 && isWordChar(text[start - 1]!)) start--;
  return text.slice(start, at);
}

/** The index of the quote that closes the one at `open`, or -1. A doubled quote (and, with `escapes`, \') is inside. */
export function closingQuote(text: string, open: number, quote: string, escapes: boolean): number {
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i];
    if (escapes && c === '\\') {
      i++;
    } else if (c === quote) {
      if (text[i + 1] === quote) i++;
      else return i;
    }
  }
  return -1;
}

/**
 * The index of a quote that continues the string closed at `close`, or -1: PostgreSQL's rule is white space holding a
 * line break, then a quote. (Its white space may hold `--` comments too; those are refused wherever they are.) Any
 * white space JavaScript knows is taken, a superset of PostgreSQL's (space, tab, form feed, CR, LF).
 */
function continuation(text: string, close: number): number {
  let lineBreak = false;
  let i = close + 1;
  for (; i < text.length && /\s/.test(text[i]!); i++) if (text[i] === '\n' || text[i] === '\r') lineBreak = true;
  return lineBreak && text[i] === "'" ? i : -1;
}

export const refuse = (why: string): ColumnCheck => ({ ok: false, reason: `the column definitions ${why}` });
