import type { PlanDropInput } from '../domain/operations';
import type { ShardRef } from '../domain/contracts';
import { askNode } from './node-reads';

/**
 * A drop's dry run (`drop --dry-run`): each node that holds a shard of the table is asked, on its own queue, what a drop
 * with the same `cascade` would do there beyond moving the shard (PostgreSQL: the views it would take into the trash,
 * the live tables' keys, policies and defaults it would detach), all nodes at once, and the notes are answered in shard
 * order, each naming its shard's table as a drop's notes do; a drop that would take nothing else is said so. A refusal a
 * node finds (HasDependents, ShardMissing) fails the run with that type, as the drop would fail (when several nodes
 * refuse, the refusal of the one holding the lowest shard). Reads only: no lock, no step, nothing changed.
 */
export async function planDrop(input: PlanDropInput): Promise<string[]> {
  const byNode = new Map<string, ShardRef[]>();
  for (const p of [...input.placement].sort((a, b) => a.shard - b.shard)) {
    byNode.set(p.node, [...(byNode.get(p.node) ?? []), { tableId: input.tableId, shard: p.shard, node: p.node }]);
  }
  const answers = await Promise.allSettled(
    [...byNode].map(async ([node, shards]) => {
      const notes = await askNode(node, (reads) =>
        reads.dependentsOfShards({ catalogId: input.catalogId, shards, ...(input.cascade ? { cascade: true } : {}) }),
      );
      return shards.map((shard, i) => ({ shard: shard.shard, notes: notes[i] ?? [] }));
    }),
  );
  const said: Array<{ shard: number; notes: string[] }> = [];
  let refused: { shard: number; error: unknown } | undefined;
  [...byNode].forEach(([, shards], i) => {
    const answer = answers[i]!;
    if (answer.status === 'fulfilled') said.push(...answer.value);
    else if (!refused || shards[0]!.shard < refused.shard) refused = { shard: shards[0]!.shard, error: answer.reason };
  });
  if (refused) throw refused.error;
  const notes = said.sort((a, b) => a.shard - b.shard).flatMap((s) => s.notes);
  return notes.length > 0 ? notes : [nothingElse(input.placement.length)];
}

/** What a dry run says of a drop that would move the table's shards and nothing else. */
export function nothingElse(shards: number): string {
  return `would move its ${shards} shard${shards === 1 ? '' : 's'} into the trash, and nothing else`;
}
