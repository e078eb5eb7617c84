import { closingQuote, MAX_COLUMN_DEFINITIONS_LENGTH, refuse, type ColumnCheck } from './columns';

/**
 * Column definitions for the MariaDB storage driver, as a user writes them inside `CREATE TABLE t (...)`: like
 * domain/columns.ts for PostgreSQL, the text must stay inside its parentheses and be nothing more, read as MariaDB's lexer
 * reads it in the sql_mode the driver pins for its sessions (storage/mariadb-session.ts: no ANSI_QUOTES, no
 * NO_BACKSLASH_ESCAPES):
 * - `'...'` and `"..."` are strings, in which a backslash escapes the next character and a doubled quote stands for one;
 *   `` `...` `` is a name, in which a doubled backtick stands for one. Any of them may hold any character;
 * - outside them, no `;` (a second statement), no comment of any kind (`#`, `--`, a block comment; MariaDB runs the
 *   text of a block comment that opens with `!` or `M!`), no backslash, and no `)` that closes what it did not open (`x int) SELECT ...` would
 *   fill the table from a query).
 * What the definitions mean MariaDB checks when the table is made; the driver sends one statement per call, which the
 * server refuses to read a second one in.
 */
export function checkMariadbColumnDefinitions(text: string): ColumnCheck {
  if (text.trim() === '') return refuse('are empty');
  if (text.length > MAX_COLUMN_DEFINITIONS_LENGTH) return refuse(`are longer than ${MAX_COLUMN_DEFINITIONS_LENGTH} characters`);
  const nul = text.indexOf('\0');
  if (nul >= 0) return refuse(`hold a NUL character at character ${nul + 1}`);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const end = closingQuote(text, i, c, true);
      if (end < 0) return refuse(`have a string opened at character ${i + 1} and never closed`);
      i = end;
    } else if (c === '`') {
      const end = closingQuote(text, i, '`', false);
      if (end < 0) return refuse(`have a quoted name opened at character ${i + 1} and never closed`);
      i = end;
    } else if (c === '(') {
      depth++;
    } else if (c === ')') {
      if (--depth < 0) return refuse(`close a parenthesis they did not open, at character ${i + 1}`);
    } else if (c === ';') {
      return refuse(`hold a ";" at character ${i + 1}: one table's columns, not statements`);
    } else if (c === '#' || (c === '-' && text[i + 1] === '-') || (c === '/' && text[i + 1] === '*')) {
      return refuse(`hold a comment at character ${i + 1}`);
    } else if (c === '\\') {
      return refuse(`hold a backslash outside a string, at character ${i + 1}`);
    }
  }
  if (depth > 0) return refuse('leave a parenthesis open');
  return { ok: true };
}
