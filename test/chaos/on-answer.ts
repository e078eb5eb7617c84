import type { FamilyMaker } from './families';
import type { ShardFingerprints } from './files';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import type { RowsOnAnswer } from './rows-on-answer';
import type { TruncatedSets } from './truncate-files';

/**
 * What the run does with each answer before its client goes on: it looks at once, before later calls change what the
 * answer was about. With files, a new table's checksums, and a truncate's sets (truncate-files.ts); on PostgreSQL nodes,
 * a dependent made at once on a new table (families.ts), and the rows of a table a drop, a recall, a purge or a truncate
 * answered for (rows-on-answer.ts).
 */
export class AnswerChecks {
  constructor(
    private readonly o: {
      fingerprints?: ShardFingerprints;
      truncatedSets?: TruncatedSets;
      families?: FamilyMaker;
      rowsOnAnswer?: RowsOnAnswer;
      /** Hears every answer first (the mariadb driver's user makes a trigger or a key on a new table). */
      heard?: (record: OpRecord) => void;
    },
  ) {}

  async onAnswer(record: OpRecord): Promise<void> {
    const { fingerprints, truncatedSets, families, rowsOnAnswer } = this.o;
    this.o.heard?.(record);
    if (record.outcome.kind !== 'ok') return;
    const table = record.outcome.table;
    const { kind } = record.request;
    if (kind === 'create') {
      await fingerprints?.record(table);
      families?.afterCreate(table);
    }
    if (rowsOnAnswer && (kind === 'trash' || kind === 'undelete' || kind === 'purge')) {
      await rowsOnAnswer.afterAnswer(`op #${record.seq} ${kind}`, table);
    }
    if (kind === 'truncate') {
      await truncatedSets?.afterTruncate(record, table);
      await rowsOnAnswer?.afterTruncate(record, table);
    }
  }

  /** What the looks found wrong. */
  get problems(): Problem[] {
    return [...(this.o.truncatedSets?.problems ?? []), ...(this.o.rowsOnAnswer?.problems ?? [])];
  }

  /** How many truncates' shards were looked at right after their answer (files: sets; PostgreSQL: rows and relations). */
  get truncatesChecked(): number {
    return (this.o.truncatedSets?.checked ?? 0) + (this.o.rowsOnAnswer?.truncatesChecked ?? 0);
  }
}
