import type { Connection } from 'mariadb';
import type { TableInfo } from '../../domain/table';
import { OWN_DATABASE } from '../../storage/mariadb-record';
import { qualified } from '../../storage/mariadb-session';
import { describeOp } from './answers';
import { identityOf } from './mariadb-rows';
import { connectTo, type MariadbNode } from './mariadb-servers';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import type { RowLedger } from './rows';

/**
 * The rows of a MariaDB table checked while the run goes on, right after a drop, a recall or a purge of it answered
 * (rows-on-answer.ts's, for MariaDB: most tables of a run expire and are purged before its end, where the rest are
 * read): a drop or a recall that answered must have moved every row seen committed into the table with it, and a purge
 * must have left no shard table. The shard is found where tablefate.shards says, read with its metadata lock held (the
 * SELECT's, until the transaction ends), and its record and InnoDB id read again under it: a later move that got there
 * first is no finding.
 */

type ShardLook = { at: string; ids: Set<number> } | 'gone' | 'moved';

export class MariadbRowsOnAnswer {
  readonly problems: Problem[] = [];
  checked = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly nodes: readonly MariadbNode[],
    private readonly catalogId: string,
    private readonly ledger: RowLedger,
  ) {}

  /** A drop, a recall or a purge answered with `table`: its shards are looked at (in turn, not waited for). */
  afterAnswer(op: OpRecord, table: TableInfo): void {
    // The rows seen committed into it before the answer: each is in the table wherever it is, unless it is purged.
    const expected = this.ledger.ofTable(table.id);
    this.queue = this.queue.then(() => this.look(op, table, expected)).catch(() => undefined);
  }

  async settle(): Promise<void> {
    await this.queue;
  }

  private async look(op: OpRecord, table: TableInfo, expected: ReturnType<RowLedger['ofTable']>): Promise<void> {
    for (const { shard, node } of table.placement) {
      const label = `${describeOp(op)}: table ${table.id} (${table.namespace}.${table.name}) shard ${shard} on ${node}`;
      let found: ShardLook;
      try {
        found = await this.readShard(node, table.id, shard);
      } catch {
        // A connection lost (a cut, a restart) or a lock not had at once: this look is skipped, the end checks again.
        continue;
      }
      if (found === 'moved') continue;
      if (table.state === 'PURGED') {
        if (found !== 'gone')
          this.problems.push({ invariant: 'rows', detail: `${label} is still at ${found.at} after the purge answered` });
        continue;
      }
      if (found === 'gone') continue; // purged since: nothing left to compare
      this.checked++;
      const ids = (expected.get(shard) ?? []).map((r) => r.id);
      const missing = ids.filter((id) => !found.ids.has(id));
      if (missing.length > 0) {
        this.problems.push({
          invariant: 'rows',
          detail:
            `${label}, right after the answer, at ${found.at}: ${missing.length} of the ${ids.length} rows seen committed into it ` +
            `are missing (ids ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''})`,
        });
      }
    }
  }

  /** The ids in the shard's table where its record says; 'gone' without a record; 'moved' when it moves as we look. */
  private async readShard(node: string, tableId: number, shard: number): Promise<ShardLook> {
    const c = await connectTo(this.nodes.find((n) => n.node === node)!.rootUrl);
    try {
      // Short: a move draining the table must not wait on the checker (it asks with NOWAIT, and tries again).
      await c.query('SET SESSION lock_wait_timeout = 1, innodb_lock_wait_timeout = 1');
      // (Each read of the record sees what is committed when it runs, not the transaction's first snapshot.)
      await c.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await c.query('START TRANSACTION');
      try {
        const before = await recordOf(c, this.catalogId, tableId, shard);
        if (!before) return 'gone';
        if (before.moving_to !== null) return 'moved';
        const rows = await c.query<Array<{ id: number }>>(`SELECT id FROM ${qualified(before.database_name, before.table_name)}`);
        // (The SELECT holds the table's metadata lock now: it is what the record says, or it moved before.)
        const after = await recordOf(c, this.catalogId, tableId, shard);
        const identity = await identityOf(c, before.database_name, before.table_name);
        if (
          identity !== before.identity ||
          after?.identity !== before.identity ||
          after.database_name !== before.database_name ||
          after.table_name !== before.table_name
        )
          return 'moved';
        return { at: `${before.database_name}.${before.table_name}`, ids: new Set(rows.map((r) => Number(r.id))) };
      } finally {
        await c.query('ROLLBACK');
      }
    } finally {
      await c.end().catch(() => c.destroy());
    }
  }
}

interface RecordRow {
  identity: number;
  database_name: string;
  table_name: string;
  moving_to: string | null;
}

/** The shard's record, as committed now. */
async function recordOf(c: Connection, catalogId: string, tableId: number, shard: number): Promise<RecordRow | undefined> {
  const [row] = await c.query<RecordRow[]>(
    `SELECT identity, database_name, table_name, moving_to FROM ${qualified(OWN_DATABASE, 'shards')}
      WHERE catalog_id = ? AND table_id = ? AND shard = ?`,
    [catalogId, tableId, shard],
  );
  return row === undefined ? undefined : { ...row, identity: Number(row.identity) };
}
