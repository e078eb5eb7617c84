import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OperationTimeoutError } from '../domain/errors';
import { workflowIdFor } from '../domain/operations';
import type { TableInfo } from '../domain/table';
import type { ShardRef } from '../storage/driver';
import type { RenameOps } from '../storage/rename-set';
import type { createTable } from '../workflows';
import { Harness } from './support/harness';
import { BreakingRenames } from './support/rename-gate';
import { CliProcess, runCli, runCliInProcess } from './support/cli';
import { setFiles, writeSet } from './support/sets-on-disk';
import { testServerAddress } from './support/test-server';
import { failureOf, sleep, waitFor } from './support/wait';

/**
 * Storage nodes served by workers of their own (remote storage): the orchestrating worker touches no file,
 * each node's worker touches its node's only, and a node whose worker is down delays what needs it.
 */
describe('storage nodes as their own workers', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ storage: 'remote', orphanGraceSeconds: 0 });
  });
  afterAll(() => h.close());

  /** The storage nodes that hold a file of table `id`, with the areas they hold it in. */
  const filesOf = async (id: number): Promise<string[]> => {
    const found: string[] = [];
    for (const node of h.storage.nodes) {
      for (const area of ['live', 'trash'] as const) {
        const dir = path.join(h.storage.root, node, area);
        const names = await fs.promises.readdir(dir).catch(() => [] as string[]);
        for (const name of names.filter((n) => n.startsWith(`t${id}-`))) found.push(`${node}/${area}/${name}`);
      }
    }
    return found.sort();
  };

  test('the whole lifecycle runs with every shard handled by the worker of its own node', async () => {
    const table = await h.client.create({ table: 'remote.orders', shards: 4 });
    expect(new Set(table.placement.map((p) => p.node))).toEqual(new Set(['node-0', 'node-1', 'node-2']));
    expect(await h.shardAreas(table)).toEqual(['live', 'live', 'live', 'live']);
    const before = (await h.shardReports(table)).map((r) => r.checksum);

    await h.client.trash({ table: 'remote.orders', retentionSeconds: 3600 });
    expect(await h.shardAreas(table)).toEqual(['trash', 'trash', 'trash', 'trash']);
    const back = await h.client.undelete({ table: table.id });
    expect(back.state).toBe('READY');
    expect((await h.shardReports(table)).map((r) => r.checksum)).toEqual(before);

    await h.client.trash({ table: 'remote.orders', retentionSeconds: 3600 });
    await h.client.purge({ tableId: table.id });
    expect(await h.shardAreas(table)).toEqual([null, null, null, null]);
    expect(await filesOf(table.id)).toEqual([]);
  });

  test('a create whose node has no worker waits for it, then finishes once the node is back', async () => {
    await h.stopNode('node-1');
    let table: TableInfo | undefined;
    try {
      const err = await failureOf(h.client.create({ table: 'remote.waits', shards: 3 }, { timeoutMs: 3000 }));
      expect(err).toBeInstanceOf(OperationTimeoutError);
      const row = await h.catalog.findByName({ namespace: 'remote', name: 'waits' });
      expect(row?.state).toBe('CREATING');
      table = row as unknown as TableInfo;
      // The nodes whose workers run have their shards; node-1's call waits in its queue, untouched.
      const files = await waitFor(
        () => filesOf(row!.id),
        (f) => f.length === 6,
        { timeoutMs: 10_000, what: 'node-0 and node-2 to create their shards' },
      );
      expect(new Set(files.map((f) => f.split('/')[0]))).toEqual(new Set(['node-0', 'node-2']));
    } finally {
      await h.startNode('node-1');
    }
    const done: TableInfo = await h.temporal.workflow
      .getHandle<typeof createTable>(workflowIdFor.create({ namespace: 'remote', name: 'waits' }, h.catalog.id))
      .result();
    expect(done).toMatchObject({ id: table.id, state: 'READY' });
    expect(await h.shardAreas(done)).toEqual(['live', 'live', 'live']);
  });

  test('the doctor reports a node whose worker is down as not looked at, and the rest as usual', async () => {
    await h.stopNode('node-0');
    try {
      const report = await h.reconcile('report');
      expect(report.skippedNodes).toEqual(['node-0']);
      expect(report.actions).toEqual([]);
    } finally {
      await h.startNode('node-0');
    }
    expect((await h.reconcile('report')).skippedNodes).toEqual([]);
  }, 60_000);

  test("sizes are the sum of each node's files, asked of the nodes' workers; a node whose worker is down leaves the size of its tables unknown", async () => {
    const table = await h.client.create({ table: 'nodes.sized', shards: 3 });
    const onDisk = (await h.shardReports(table)).reduce((sum, r) => sum + r.bytes, 0);
    expect(onDisk).toBeGreaterThan(0);
    expect((await h.client.describe({ table: 'nodes.sized', withSizes: true })).bytes).toBe(onDisk);
    expect((await h.client.list({ withSizes: true })).find((t) => t.id === table.id)?.bytes).toBe(onDisk);
    // Without withSizes, the catalog's answer alone: no size, and no worker asked.
    expect((await h.client.describe({ table: 'nodes.sized' })).bytes).toBeUndefined();

    const lone = await h.client.create({ table: 'nodes.lone', shards: 1 });
    await h.stopNode(table.placement[0]!.node);
    try {
      const sizes = new Map((await h.client.list({ withSizes: true })).map((t) => [t.id, t.bytes]));
      expect(sizes.get(table.id)).toBeNull();
      // A table with no shard on the node that is down is measured as usual.
      const loneNode = lone.placement[0]!.node;
      expect(sizes.get(lone.id)).toBe(loneNode === table.placement[0]!.node ? null : (await h.shardReports(lone))[0]!.bytes);
    } finally {
      await h.startNode(table.placement[0]!.node);
    }
  }, 60_000);

  test('a remote worker whose TABLEFATE_STORAGE_NODES leaves shards behind refuses to start, naming them from the catalog', async () => {
    const onNode2 = (await h.catalog.listTables({ includeTrashed: true })).filter((t) => t.placement.some((p) => p.node === 'node-2'));
    expect(onNode2.length).toBeGreaterThan(0);
    const result = await runCli(['worker', '--storage', 'remote'], {
      env: {
        ...process.env,
        TABLEFATE_HOME: h.home,
        TEMPORAL_ADDRESS: testServerAddress(),
        TABLEFATE_STORAGE_NODES: '2',
        TABLEFATE_LOG_LEVEL: 'warn',
      },
      timeoutMs: 30_000,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`TABLEFATE_STORAGE_NODES=2 leaves shards behind: node-2 holds shards of table`);
    expect(result.stderr).toContain(String(onNode2[0]!.id));
    expect(result.stderr).toContain('set TABLEFATE_STORAGE_NODES to at least 3');
  });

  test("the reconciler asks each node's worker for its sets and collects an orphan through it", async () => {
    const stray: ShardRef = { tableId: 999_999_999, shard: 0, node: 'node-2' };
    const files = await writeSet(h.storage.root, stray, 'live');
    const report = await h.reconcile();
    expect(report.skippedNodes).toEqual([]);
    expect(report.findings).toContainEqual(
      expect.objectContaining({ kind: 'orphan', set: expect.objectContaining({ tableId: stray.tableId, node: 'node-2' }) as unknown }),
    );
    expect(report.actions).toContainEqual({ finding: expect.stringContaining(`t${stray.tableId}-s0`) as unknown, outcome: 'collected' });
    for (const file of [...files, ...setFiles(h.storage.root, stray, 'garbage')]) expect(fs.existsSync(file)).toBe(false);
  });
});

test("a fatal fault on a storage node stops that node's worker alone and quarantines it; `quarantine --dir` clears it and the operation finishes", async () => {
  const renames = new BreakingRenames();
  const h = await Harness.start({ storage: 'remote', renameOps: renames });
  try {
    const table = await h.client.create({ table: 'remote.fatal', shards: 1 });
    const { node } = table.placement[0]!;
    renames.armed = true;
    const trashing = h.client.trash({ table: 'remote.fatal', retentionSeconds: 3600 }, { timeoutMs: 60_000 });
    await h.nodeStopped(node);
    expect(h.fatalErrors.map((e) => e.name)).toEqual(['FatalStorageError']);
    expect(h.worker?.getState()).toBe('RUNNING');
    const env = { ...process.env, TABLEFATE_HOME: path.join(h.home, 'elsewhere') };
    const listed = await runCli(['quarantine', '--dir', h.storage.root, '--json'], { env });
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as Array<{ node: string }>).map((m) => m.node)).toEqual([node]);

    renames.armed = false;
    const cleared = await runCli(['quarantine', 'clear', node, '--dir', h.storage.root], { env });
    expect(cleared.code).toBe(0);
    expect(cleared.stdout).toContain(`${node}: quarantine cleared`);
    await h.startNode(node);
    expect((await trashing).state).toBe('TRASHED');
    expect(await h.shardAreas(table)).toEqual(['trash']);
  } finally {
    await h.close();
  }
});

test("undelete reports how many shards are back while it runs, node by node as the nodes' workers answer (Pegasus recall progress)", async () => {
  // Shard 0's renames are slow, so the other nodes' shards are seen back before its node's.
  let slow = false;
  const slowShard0: RenameOps = {
    async rename(from, to) {
      if (slow && /-s0\./.test(path.basename(from))) await sleep(1500);
      await fs.promises.rename(from, to);
    },
  };
  const h = await Harness.start({ storage: 'remote', renameOps: slowShard0 });
  try {
    const table = await h.client.create({ table: 'remote.progress', shards: 6 });
    await h.client.trash({ table: 'remote.progress', retentionSeconds: 3600 });
    slow = true;
    const seen: Array<{ shardsBack: number; shards: number }> = [];
    const restored = await h.client.undelete({ table: table.id }, { onProgress: (p) => seen.push({ ...p }) });
    expect(restored.state).toBe('READY');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((p) => p.shards === 6)).toBe(true);
    // Six shards on three nodes, two a node: the two prompt nodes' four are seen back before the slow one's.
    expect(seen.every((p) => p.shardsBack % 2 === 0)).toBe(true);
    expect(seen.some((p) => p.shardsBack === 4)).toBe(true);
    const counts = seen.map((p) => p.shardsBack);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
  } finally {
    await h.close();
  }
});

describe('tablefate storage-node refuses what it cannot serve', () => {
  let home: string;
  beforeAll(async () => {
    home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-node-'));
  });
  afterAll(() => fs.promises.rm(home, { recursive: true, force: true }));
  const env = () => ({ ...process.env, TABLEFATE_HOME: home, TEMPORAL_ADDRESS: testServerAddress(), TABLEFATE_STORAGE_NODES: '3' });

  test('a node beyond TABLEFATE_STORAGE_NODES, or no --dir, is a usage error (exit 2) that starts nothing', async () => {
    // (In-process: each is refused before a worker starts.)
    const beyond = await runCliInProcess(['storage-node', 'node-3', '--dir', home], { env: env() });
    expect(beyond.code).toBe(2);
    expect(beyond.stderr).toContain(
      'storage node "node-3" is not one of the 3 configured (TABLEFATE_STORAGE_NODES=3: node-0, node-1, node-2)',
    );
    const noDir = await runCliInProcess(['storage-node', 'node-0'], { env: env() });
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toContain('give --dir <path>');
    const both = await runCliInProcess(['storage-node', 'node-0', '--dir', home, '--postgres', 'postgres://x@localhost/db'], {
      env: env(),
    });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--postgres <url> (its tables in that database) or --mariadb <url>');
    const badMode = await runCliInProcess(['worker', '--storage', 'nfs'], { env: env() });
    expect(badMode.code).toBe(2);
    expect(badMode.stderr).toContain('--storage is local or remote, got "nfs"');
    expect(fs.readdirSync(home)).toEqual([]);
  });

  test('a node whose catalog does not exist yet waits for it, naming it, creates no catalog, and stops on Ctrl-C', async () => {
    const node = CliProcess.start(['storage-node', 'node-0', '--dir', path.join(home, 'nodes')], env());
    try {
      await waitFor(
        () => Promise.resolve({ stderr: node.stderr, exit: node.exitStatus }),
        ({ stderr, exit }) => exit !== undefined || stderr.includes('waiting for the catalog at'),
        { what: 'the node to say it waits for the catalog' },
      );
      expect(node.exitStatus).toBeUndefined();
      expect(node.stderr).toContain(path.join(home, 'catalog.sqlite'));
      expect(fs.existsSync(path.join(home, 'catalog.sqlite'))).toBe(false);
    } finally {
      expect(await node.stop('SIGINT')).toEqual({ code: 0, signal: null });
    }
    expect(fs.existsSync(path.join(home, 'catalog.sqlite'))).toBe(false);
  });
});
