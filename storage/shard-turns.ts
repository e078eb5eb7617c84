/** The change of each shard that runs now in this process, by the shard's place on disk, or the last one queued. */
const shardTurns = new Map<string, Promise<void>>();

/**
 * Runs `change` once every earlier change of the same shard in this process has settled. Two changes of one shard
 * must never interleave their renames: an attempt that its caller has given up on (cancelled, timed out, superseded
 * by a retry) may still be renaming when the next change, an undo say, begins; each set move is whole only if they
 * take turns. (Two processes serving one node's directory are not covered: a node has one worker.)
 */
export async function inTurn<T>(shard: string, change: () => Promise<T>): Promise<T> {
  const before = shardTurns.get(shard) ?? Promise.resolve();
  let settle!: () => void;
  const mine = before.then(() => new Promise<void>((resolve) => (settle = resolve)));
  shardTurns.set(shard, mine);
  await before;
  try {
    return await change();
  } finally {
    settle();
    if (shardTurns.get(shard) === mine) shardTurns.delete(shard);
  }
}
