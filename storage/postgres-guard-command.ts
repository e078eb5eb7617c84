import { Client } from 'pg';
import { InvalidInputError, OperationFailedError, TableFateError } from '../domain/errors';
import { redactUrl } from '../domain/deployment';
import { guardState, installGuard, removeGuard, type GuardAction, type GuardNodeResult } from './postgres-guard';

/** `tablefate guard install|status|remove`: which nodes it is for, the action on each through its own session, and what it says. */

/** The nodes a guard command is for: every node of the deployment, or `node`; through its url, or `url` instead. */
export function guardTargets(
  config: { storageDriver: string; storageUrls: readonly string[] },
  node: string | undefined,
  url: string | undefined,
): Array<{ node: string; url: string }> {
  if (config.storageDriver !== 'postgres' || config.storageUrls.length === 0)
    throw new InvalidInputError(
      'guard is for the PostgreSQL storage driver: set TABLEFATE_STORAGE_DRIVER=postgres and TABLEFATE_STORAGE_URLS',
    );
  const nodes = config.storageUrls.map((u, k) => ({ node: `node-${k}`, url: u }));
  if (url !== undefined && !/^postgres(ql)?:\/\/[^\s]+$/.test(url)) throw new InvalidInputError('guard: --url is not a postgres:// url');
  if (node === undefined) {
    if (url === undefined) return nodes;
    if (nodes.length > 1)
      throw new InvalidInputError(`guard: --url names one database: say which node's with --node (node-0 to node-${nodes.length - 1})`);
    return [{ node: nodes[0]!.node, url }];
  }
  const found = nodes.find((n) => n.node === node);
  if (!found)
    throw new InvalidInputError(
      `guard: no node ${node} in this deployment (TABLEFATE_STORAGE_URLS names node-0 to node-${nodes.length - 1})`,
    );
  // Another role, maybe another way in, but the node's database: a guard put on another one would protect nothing.
  const given = url === undefined ? undefined : databaseOf(url);
  const its = databaseOf(found.url);
  if (given !== undefined && its !== undefined && given !== its)
    throw new InvalidInputError(`guard: --url names database ${given}, but ${node}'s is ${its}`);
  return [{ node, url: url ?? found.url }];
}

/** The database a url names, when it names one. */
function databaseOf(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).pathname.slice(1)) || undefined;
  } catch {
    return undefined;
  }
}

/** Runs `action` on each target node in turn; stops at the first node that fails, saying which. */
export async function runGuard(action: GuardAction, targets: ReadonlyArray<{ node: string; url: string }>): Promise<GuardNodeResult[]> {
  const results: GuardNodeResult[] = [];
  for (const target of targets) {
    const c = session(target.url);
    // A session the server ends must fail its query, not the process.
    c.on('error', () => undefined);
    const shown = redactUrl(target.url);
    try {
      try {
        await c.connect();
      } catch (err) {
        throw new OperationFailedError(
          'StorageFault',
          `guard ${action} on ${target.node} (${shown}): cannot connect: ${(err as Error).message}`,
          undefined,
          {
            cause: err,
          },
        );
      }
      const state =
        action === 'install'
          ? await installGuard(c, target.node)
          : action === 'remove'
            ? await removeGuard(c, target.node)
            : await guardState(c);
      results.push({ node: target.node, url: shown, ...state });
    } catch (err) {
      if (err instanceof TableFateError) throw err;
      const code = (err as { code?: unknown }).code;
      throw new OperationFailedError(
        'StorageFault',
        `guard ${action} on ${target.node} (${shown}) failed: ${(err as Error).message}${typeof code === 'string' ? ` (SQLSTATE ${code})` : ''}`,
        undefined,
        { cause: err },
      );
    } finally {
      await c.end().catch(() => undefined);
    }
  }
  return results;
}

/**
 * One line a node: NODE, GUARD (on, on but not for some tables' TRUNCATE, disabled, partly there, off), and the
 * database, its password left out.
 */
export function formatGuard(results: readonly GuardNodeResult[]): string {
  const rows = results.map((r) => [r.node, guardWords(r), r.url]);
  const header = ['NODE', 'GUARD', 'DATABASE'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

const SHOWN_TABLES = 5;

function guardWords(r: GuardNodeResult): string {
  if (r.enabled) return 'on';
  const uncovered = r.truncate.uncovered ?? [];
  if (r.installed && r.triggers.every((t) => t.enabled) && uncovered.length > 0) {
    const more = uncovered.length > SHOWN_TABLES ? ` and ${uncovered.length - SHOWN_TABLES} more` : '';
    return (
      `on, but TRUNCATE is not refused on ${uncovered.length} table(s): ${uncovered.slice(0, SHOWN_TABLES).join(', ')}${more} ` +
      '(tablefate guard install covers them)'
    );
  }
  if (r.installed) return 'installed, disabled (tablefate guard install enables it)';
  const parts = [...r.triggers.map((t) => t.name), ...(r.truncate.functions ? ['its TRUNCATE triggers'] : [])];
  return parts.length > 0 ? `partly there (${parts.join(', ')}): tablefate guard install` : 'off';
}

/** A session of the guard's own: search_path and how strings read pinned, bounded waits, named. */
function session(url: string): Client {
  return new Client({
    connectionString: url,
    options: '-c search_path=pg_catalog,pg_temp -c standard_conforming_strings=on -c lock_timeout=10s',
    application_name: 'tablefate guard',
    statement_timeout: 60_000,
    connectionTimeoutMillis: 15_000,
  });
}
