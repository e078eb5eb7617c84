import type { TableInfo } from '../../domain/table';
import { describeOp, explainers, namesOf } from './answers';
import { notOnLive, objectsOn, triggerDoesNotFire, type MadeObject } from './mariadb-objects';
import type { MariadbNode } from './mariadb-servers';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import { liveTableOf } from './rows';

/**
 * The run's triggers and keys looked at right after a recall of their table answered (most trashed tables expire
 * during the run, so the checker's recalls at rest see few): each one made before the recall began must be back on the
 * table where the answer says it is live, a trigger firing. What was wrong is judged at the end, with every call of the
 * run: a drop of the table that may have acted after the recall began (and began before the look ended) excuses it.
 */

interface Look {
  op: OpRecord;
  table: TableInfo;
  /** When the look ended: a drop that started after it changed nothing it saw. */
  endedAt: number;
  wrong: string[];
}

export class ObjectsOnRecall {
  /** Objects looked at after a recall's answer. */
  looked = 0;
  private readonly looks: Look[] = [];
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly nodes: readonly MariadbNode[],
    private readonly objects: readonly MadeObject[],
  ) {}

  /** A recall answered with `table`: its objects are looked at (in turn, not waited for). */
  afterRecall(op: OpRecord, table: TableInfo): void {
    const mine = this.objects.filter((x) => x.tableId === table.id && x.uncertain === undefined && x.madeAt < op.startedAt);
    if (mine.length === 0) return;
    this.queue = this.queue.then(() => this.look(op, table, mine)).catch(() => undefined);
  }

  private async look(op: OpRecord, table: TableInfo, mine: MadeObject[]): Promise<void> {
    const wrong: string[] = [];
    for (const node of new Set(mine.map((x) => x.node))) {
      const url = this.nodes.find((n) => n.node === node)!.rootUrl;
      const on = await objectsOn(url);
      for (const x of mine.filter((m) => m.node === node)) {
        this.looked++;
        const live = liveTableOf({ namespace: table.namespace, name: table.name, params: { shards: table.shards } }, x.shard);
        const missing = notOnLive(x, live, on);
        if (missing) wrong.push(missing);
        else if (x.kind === 'trigger') {
          // (Refused a lock, or the table gone meanwhile: no finding of its own, the look is only what it saw.)
          const fires = await triggerDoesNotFire(url, x, live).catch(() => undefined);
          if (fires) wrong.push(fires);
        }
      }
    }
    this.looks.push({ op, table, endedAt: Date.now(), wrong });
  }

  /** Waits for the looks under way. */
  async settle(): Promise<void> {
    await this.queue;
  }

  /** What was not back after a recall, unless a call of the run may have moved the table between the answer and the look. */
  problems(ops: readonly OpRecord[]): Problem[] {
    const problems: Problem[] = [];
    for (const look of this.looks) {
      if (look.wrong.length === 0) continue;
      const names = namesOf(ops, look.table.id, undefined);
      // (From the recall's start: it may have put the table back long before its answer came, and a drop taken it since.)
      const since = explainers(ops, 'trash', look.table.id, names, look.op.startedAt).filter((d) => d.startedAt < look.endedAt);
      if (since.length > 0) continue;
      problems.push({
        invariant: 'objects',
        detail:
          `${describeOp(look.op)} answered table ${look.table.id} live as ${look.table.namespace}.${look.table.name}, and right ` +
          `after: ${look.wrong.join('; ')}`,
      });
    }
    return problems;
  }
}
