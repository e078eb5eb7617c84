import { Client } from 'pg';
import type { TableInfo } from '../../domain/table';
import type { Problem } from './problems';
import { quoteIdent, type NodeDatabase, type RowLedger } from './rows';

const qualified = (schema: string, table: string) => `${quoteIdent(schema)}.${quoteIdent(table)}`;

/**
 * The rows of a table checked while the run goes on, right after an operation on it answered: a trash or a recall
 * that answered must have moved every row seen committed into the table with it, and a purge that answered must
 * have left no shard table anywhere. The shard is found by its identity (tablefate.shards), wherever it is by now,
 * and read under a share lock after finding it again: a later move that got there first is no finding.
 */
export class RowsOnAnswer {
  readonly problems: Problem[] = [];
  checked = 0;
  private readonly clients = new Map<string, Client>();

  constructor(
    private readonly nodes: readonly NodeDatabase[],
    private readonly catalogId: string,
    private readonly ledger: RowLedger,
  ) {}

  async afterAnswer(what: string, table: TableInfo): Promise<void> {
    for (const { shard, node } of table.placement) {
      // The rows seen committed before this look: each is in the table wherever it is, unless the table is gone.
      const expected = (this.ledger.ofTable(table.id).get(shard) ?? []).map((r) => r.id);
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
        this.checked++;
        const missing = expected.filter((id) => !found.ids.has(id));
        if (missing.length > 0) {
          this.problems.push({
            invariant: 'rows',
            detail:
              `${label}, right after the answer, at ${found.at}: ${missing.length} of the ${expected.length} rows seen committed ` +
              `into it are missing (ids ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''})`,
          });
        }
      } catch {
        // A connection lost or a lock not had at once: this look is skipped, the end of the run checks again.
        await this.forget(node);
      }
    }
  }

  async close(): Promise<void> {
    for (const node of [...this.clients.keys()]) await this.forget(node);
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
  private async readShard(node: string, tableId: number, shard: number): Promise<{ at: string; ids: Set<number> } | 'gone' | 'moved'> {
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
      return { at: `${before.schema}.${before.table}`, ids: new Set(rows.map((r) => Number(r.id))) };
    } finally {
      await client.query('ROLLBACK');
    }
  }
}
