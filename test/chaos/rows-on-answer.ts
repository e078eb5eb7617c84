import { Client } from 'pg';
import type { Catalog } from '../../catalog/catalog';
import type { TableInfo } from '../../domain/table';
import { describeOp } from './answers';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import { quoteIdent, type NodeDatabase, type RowLedger } from './rows';
import { entriesNow } from './truncate-lineage';

const qualified = (schema: string, table: string) => `${quoteIdent(schema)}.${quoteIdent(table)}`;

/** A shard table found by its identity (tablefate.shards), wherever it is: where, which relation, and its ids. */
interface ShardLook {
  at: string;
  oid: number;
  ids: Set<number>;
}

/**
 * The rows of a table checked while the run goes on, right after an operation on it answered: a trash or a recall
 * that answered must have moved every row seen committed into the table with it, and a purge that answered must
 * have left no shard table anywhere. The shard is found by its identity (tablefate.shards), wherever it is by now,
 * and read under a share lock after finding it again: a later move that got there first is no finding.
 *
 * A truncate (issue 43) moves the table's rows into its entry and gives the table an empty twin: the rows a drop or a
 * recall must have moved are then those written since the table's last truncate (they began after the first sight of
 * its last entry, or after the answer of the truncate that made it). A truncate that answered is checked too, by the
 * relations (PostgreSQL hands out OIDs in increasing order, and a row never leaves its relation): the entry holds the
 * relation the table had, with every row seen committed into it, and the table a newer one (never both); the rows
 * committed before the call began are in the entry's relation or an older one, and in the entry's own when the table
 * had no truncate before (never neither).
 */
export class RowsOnAnswer {
  readonly problems: Problem[] = [];
  checked = 0;
  truncatesChecked = 0;
  private readonly clients = new Map<string, Client>();
  /** Each truncate's entry, by id: a time by which its rows had moved (the first sight of it, or its call's answer). */
  private readonly movedBy = new Map<number, number>();

  constructor(
    private readonly nodes: readonly NodeDatabase[],
    private readonly catalogId: string,
    private readonly ledger: RowLedger,
    private readonly catalog: Pick<Catalog, 'getTable'>,
  ) {}

  async afterAnswer(what: string, table: TableInfo): Promise<void> {
    const since = await this.lastTruncate(table.id);
    if (since === 'truncating') return;
    for (const { shard, node } of table.placement) {
      // The rows seen committed before this look, since the last truncate: each is in the table wherever it is, unless
      // the table is gone.
      const expected = (this.ledger.ofTable(table.id).get(shard) ?? [])
        .filter((r) => since === undefined || (r.startedAt !== undefined && r.startedAt > since))
        .map((r) => r.id);
      try {
        const found = await this.readShard(node, table.id, shard);
        const label = `${what}: table ${table.id} (${table.namespace}.${table.name}) shard ${shard} on ${node}`;
        if (found === 'moved') continue;
        if (table.state === 'PURGED') {
          if (found !== 'gone')
            this.problems.push({ invariant: 'rows', detail: `${label} is still at ${found.at} after the purge answered` });
          continue;
        }
        if (found === 'gone') continue; // purged since (a later purge, or the expiry): nothing left to compare
        // Truncated while we looked (its move waits for our lock, or came first): another table's rows by now.
        if ((await this.lastTruncate(table.id)) !== since) continue;
        this.checked++;
        const missing = expected.filter((id) => !found.ids.has(id));
        if (missing.length > 0) {
          this.problems.push({
            invariant: 'rows',
            detail:
              `${label}, right after the answer, at ${found.at}: ${missing.length} of the ${expected.length} rows seen committed ` +
              `into it${since === undefined ? '' : ' since its last truncate'} are missing (ids ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''})`,
          });
        }
      } catch {
        // A connection lost or a lock not had at once: this look is skipped, the end of the run checks again.
        await this.forget(node);
      }
    }
  }

  /** A truncate answered `op` with `entry`: its table's rows are in the entry, and the table's relation is a newer one. */
  async afterTruncate(op: OpRecord, entry: TableInfo): Promise<void> {
    const from = entry.truncatedFrom;
    if (from === undefined) return; // judged at rest (truncate-answers.ts)
    this.movedBy.set(entry.id, Math.min(this.movedBy.get(entry.id) ?? op.endedAt, op.endedAt));
    const earlier = (await entriesNow(this.catalog, from)).filter((e) => e.id < entry.id);
    for (const { shard, node } of entry.placement) {
      const label = `${describeOp(op)}: entry ${entry.id} of table ${from}, shard ${shard} on ${node}`;
      const problem = (detail: string) => this.problems.push({ invariant: 'rows', detail: `${label}: ${detail}` });
      try {
        const rows = await this.readShard(node, entry.id, shard);
        const table = await this.readShard(node, from, shard);
        // Moved on (recalled, truncated or dropped again) or purged since the answer: the end of the run judges it.
        if (rows === 'moved' || rows === 'gone' || table === 'moved' || table === 'gone') continue;
        this.truncatesChecked++;
        if (table.oid <= rows.oid) {
          problem(
            `the table is relation ${table.oid} (${table.at}), the entry ${rows.oid} (${rows.at}): the table's is not the newer, ` +
              'so its rows did not leave it',
          );
          continue;
        }
        const seen = this.ledger.ofTable(from).get(shard) ?? [];
        const lost = seen.filter((r) => r.oid === rows.oid && !rows.ids.has(r.id)).map((r) => r.id);
        if (lost.length > 0)
          problem(`${lost.length} rows seen committed into its relation ${rows.oid} are not in it (ids ${lost.slice(0, 10).join(', ')})`);
        const before = seen.filter((r) => r.at < op.startedAt && r.oid !== undefined);
        const newer = before.filter((r) => r.oid! > rows.oid).map((r) => r.id);
        if (newer.length > 0) {
          problem(
            `${newer.length} rows committed before the call began are in a relation newer than the entry's ${rows.oid} ` +
              `(ids ${newer.slice(0, 10).join(', ')}): left in the live table`,
          );
        }
        const last = Math.max(...before.map((r) => r.oid!));
        if (before.length > 0 && last < rows.oid && earlier.length === 0) {
          problem(
            `the rows committed before the call began are in relation ${last}, older than the entry's ${rows.oid}, and the ` +
              `table has no earlier entry to hold it: those rows are neither in the entry nor in the table`,
          );
        }
      } catch {
        await this.forget(node);
      }
    }
  }

  async close(): Promise<void> {
    for (const node of [...this.clients.keys()]) await this.forget(node);
  }

  /**
   * A time after which table `id`'s last truncate had moved its rows: the earliest the run knew its last entry (its
   * call's answer, or the first look that found it); undefined when it has none; 'truncating' while a truncate of it may
   * be moving them (its move may come before its entry is in the catalog).
   */
  private async lastTruncate(id: number): Promise<number | undefined | 'truncating'> {
    if ((await this.catalog.getTable(id))?.state === 'TRUNCATING') return 'truncating';
    const entries = await entriesNow(this.catalog, id);
    if (entries.length === 0) return undefined;
    const now = Date.now();
    for (const e of entries) if (!this.movedBy.has(e.id)) this.movedBy.set(e.id, now);
    return Math.max(...entries.map((e) => this.movedBy.get(e.id)!));
  }

  private async forget(node: string): Promise<void> {
    const client = this.clients.get(node);
    this.clients.delete(node);
    await client?.end().catch(() => undefined);
  }

  private async clientOf(node: string): Promise<Client> {
    const known = this.clients.get(node);
    if (known) return known;
    const client = new Client({ connectionString: this.nodes.find((n) => n.node === node)!.url, application_name: 'chaos checker' });
    client.on('error', () => this.clients.delete(node));
    await client.connect();
    this.clients.set(node, client);
    return client;
  }

  /** The ids in the shard's table, where it is; 'gone' when tablefate placed none (or dropped it); 'moved' when it moved as we looked. */
  private async readShard(node: string, tableId: number, shard: number): Promise<ShardLook | 'gone' | 'moved'> {
    const client = await this.clientOf(node);
    const locate = async () => {
      const { rows } = await client.query<{ oid: string; schema: string; table: string }>(
        `SELECT s.table_oid::int8 AS oid, n.nspname AS schema, c.relname AS table
           FROM tablefate.shards s JOIN pg_class c ON c.oid = s.table_oid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE s.catalog_id = $1 AND s.table_id = $2 AND s.shard = $3`,
        [this.catalogId, tableId, shard],
      );
      return rows[0];
    };
    await client.query('BEGIN');
    try {
      // Short: a drop draining the table must not wait on the checker.
      await client.query("SET LOCAL lock_timeout = '200ms'");
      const before = await locate();
      if (!before) return 'gone';
      await client.query(`LOCK TABLE ${qualified(before.schema, before.table)} IN ACCESS SHARE MODE`);
      const after = await locate();
      if (after?.oid !== before.oid || after.schema !== before.schema || after.table !== before.table) return 'moved';
      const { rows } = await client.query<{ id: string }>(`SELECT id FROM ${qualified(before.schema, before.table)}`);
      return { at: `${before.schema}.${before.table}`, oid: Number(before.oid), ids: new Set(rows.map((r) => Number(r.id))) };
    } finally {
      await client.query('ROLLBACK');
    }
  }
}
