import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import { withFailureMapping } from '../../activities/failures';
import { LockLostError } from '../../catalog/lock-lost';
import { TableExistsError } from '../../domain/errors';
import {
  classifyErrno,
  classifyStorageError,
  errnoOf,
  FatalStorageError,
  InvalidShardRefError,
  LocalFileStorage,
  PermanentStorageError,
  QuarantinedNodeError,
  quarantineFile,
  shardPaths,
  StorageInvariantError,
  StorageIoError,
  writeQuarantine,
  type RenameOps,
  type ShardRef,
} from '../../storage';
import { filesUnder, tempRootPerTest } from '../support/temp-root';

/*
 * Storage faults end operations instead of hanging them: real file-system faults (a file where a directory
 * belongs, a directory where a file belongs) are classified by errno, permanent ones end the operation at
 * once, transient ones after a bounded number of attempts, and a fatal one quarantines its node.
 */

let root: string;
tempRootPerTest('tablefate-faults-', (dir) => (root = dir));

/** What a promise rejected with (fails the test if it resolved). */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

describe('classifying real file-system errors', () => {
  test('a path below a plain file fails with ENOTDIR, which is permanent', async () => {
    const file = path.join(root, 'plain');
    await fs.writeFile(file, 'x');
    const err = await rejectionOf(fs.stat(path.join(file, 'below')));
    expect(errnoOf(err)).toBe('ENOTDIR');
    expect(classifyStorageError(err)).toBe('permanent');
  });

  test('writing to a directory fails with EISDIR, which is permanent', async () => {
    const err = await rejectionOf(fs.writeFile(root, 'x'));
    expect(errnoOf(err)).toBe('EISDIR');
    expect(classifyStorageError(err)).toBe('permanent');
  });

  test('making a directory where a file is fails with EEXIST, which is permanent', async () => {
    const file = path.join(root, 'plain');
    await fs.writeFile(file, 'x');
    const err = await rejectionOf(fs.mkdir(file, { recursive: true }));
    expect(errnoOf(err)).toBe('EEXIST');
    expect(classifyStorageError(err)).toBe('permanent');
  });

  test('a file in a missing directory fails with ENOENT, which is transient (a concurrent move can cause it)', async () => {
    const err = await rejectionOf(fs.open(path.join(root, 'missing', 'file'), 'w'));
    expect(errnoOf(err)).toBe('ENOENT');
    expect(classifyStorageError(err)).toBe('transient');
  });

  test('errnos that retrying cannot fix are permanent, those that may pass are transient, unknown ones transient', () => {
    const permanent = ['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'EISDIR', 'EIO'];
    const transient = ['ENOSPC', 'EMFILE', 'EBUSY', 'EAGAIN', 'ENOENT', 'EWHATEVER'];
    expect([...permanent, ...transient].map((code) => [code, classifyErrno(code)])).toEqual([
      ...permanent.map((code) => [code, 'permanent']),
      ...transient.map((code) => [code, 'transient']),
    ]);
  });

  test("the driver's own errors classify by class; errors that are not storage's are not classified", () => {
    expect(classifyStorageError(new PermanentStorageError('injected'))).toBe('permanent');
    expect(classifyStorageError(new InvalidShardRefError('unknown storage node "node-9"'))).toBe('permanent');
    expect(classifyStorageError(new QuarantinedNodeError({ node: 'node-1', reason: 'r', since: 's', pid: 1, host: 'h' }))).toBe(
      'permanent',
    );
    expect(classifyStorageError(new StorageInvariantError('cannot move: it is in neither'))).toBe('transient');
    expect(classifyStorageError(new StorageIoError('moveShard', 'shard t1-s0 on node-0', 'node-0', new Error('odd')))).toBe('transient');
    expect(classifyStorageError(new FatalStorageError('half renamed'))).toBe('fatal');
    // A catalog error (SQLite's codes are not errnos), a domain error, a plain error: not storage's to judge.
    expect(classifyStorageError(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }))).toBeUndefined();
    expect(classifyStorageError(new TableExistsError('exists'))).toBeUndefined();
    expect(classifyStorageError(new Error('something'))).toBeUndefined();
  });
});

describe('the driver under real faults', () => {
  const onNode1: ShardRef = { tableId: 5, shard: 0, node: 'node-1' };

  test('a node whose live directory is a plain file fails createShard with an error naming shard, node and errno, leaving no file', async () => {
    const storage = new LocalFileStorage({ root });
    await fs.mkdir(path.join(root, 'node-1'), { recursive: true });
    await fs.writeFile(path.join(root, 'node-1', 'live'), 'not a directory');

    const err = await rejectionOf(storage.createShard(onNode1));
    expect(err).toBeInstanceOf(StorageIoError);
    expect((err as StorageIoError).code).toBe('EEXIST');
    expect((err as Error).message).toMatch(/^createShard of shard t5-s0 on node-1 failed: EEXIST/);
    expect(classifyStorageError(err)).toBe('permanent');
    // No temporary set left behind in node-1/tmp: the live directory is checked before anything is written.
    expect(await filesUnder(root)).toEqual(['node-1/live']);
    // Nothing of the shard can be below a file, so dropping it (create's compensation) succeeds.
    await storage.dropShard(onNode1);
  });

  test('a node directory that is a plain file fails with ENOTDIR', async () => {
    const storage = new LocalFileStorage({ root });
    await fs.writeFile(path.join(root, 'node-1'), 'not a directory');
    const err = await rejectionOf(storage.createShard(onNode1));
    expect(errnoOf(err)).toBe('ENOTDIR');
    expect((err as Error).message).toContain('node-1');
    expect(classifyStorageError(err)).toBe('permanent');
  });

  test('a directory where a shard file belongs makes dropShard fail permanently (EISDIR), not report success', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(onNode1);
    const [dat] = shardPaths(root, onNode1, 'live');
    await fs.rm(dat!);
    await fs.mkdir(path.join(dat!, 'inside'), { recursive: true });
    const err = await rejectionOf(storage.dropShard(onNode1));
    expect(errnoOf(err)).toMatch(/^(EISDIR|EPERM)$/);
    expect(classifyStorageError(err)).toBe('permanent');
    expect((await fs.stat(dat!)).isDirectory()).toBe(true);
  });

  test('an unknown node is a permanent InvalidShardRefError naming the node and the shard', async () => {
    const err = await rejectionOf(new LocalFileStorage({ root, nodeCount: 2 }).moveShard({ ...onNode1, node: 'node-2' }, 'live', 'trash'));
    expect(err).toBeInstanceOf(InvalidShardRefError);
    expect((err as Error).message).toMatch(/unknown storage node "node-2" for shard t5-s0/);
    expect(classifyStorageError(err)).toBe('permanent');
  });

  test('a shard missing from both areas is a transient StorageInvariantError', async () => {
    const err = await rejectionOf(new LocalFileStorage({ root }).moveShard(onNode1, 'live', 'trash'));
    expect(err).toBeInstanceOf(StorageInvariantError);
    expect((err as Error).message).toMatch(/t5-s0 on node-1 .*in neither/);
    expect(classifyStorageError(err)).toBe('transient');
  });
});

describe('quarantine', () => {
  const ref: ShardRef = { tableId: 9, shard: 1, node: 'node-1' };
  const healthy: ShardRef = { tableId: 9, shard: 0, node: 'node-0' };

  /** The second rename of every set fails, and so does its roll-back: what a dying disk does. */
  const failingRenames = (): RenameOps => {
    let calls = 0;
    return {
      async rename(from, to) {
        if (++calls >= 2) throw Object.assign(new Error(`EIO: i/o error, rename '${from}'`), { code: 'EIO' });
        await fs.rename(from, to);
      },
    };
  };

  test('a fatal error quarantines its node on disk; every method on it, from any driver, then refuses until cleared', async () => {
    await new LocalFileStorage({ root }).createShard(ref);
    const dying = new LocalFileStorage({ root, renameOps: failingRenames() });
    const fatal = await rejectionOf(dying.moveShard(ref, 'live', 'trash'));
    expect(fatal).toBeInstanceOf(FatalStorageError);
    expect((fatal as Error).message).toMatch(/node-1 is quarantined since .*tablefate quarantine clear node-1/);

    const marker = JSON.parse(await fs.readFile(quarantineFile(root, 'node-1'), 'utf8')) as Record<string, unknown>;
    expect(marker).toEqual({
      node: 'node-1',
      reason: expect.stringMatching(/^FatalStorageError in moveShard of shard t9-s1 on node-1: rename set left half renamed/) as unknown,
      since: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) as unknown,
      pid: process.pid,
      host: os.hostname(),
    });

    // Another worker (a new driver on the same storage) keeps off the node, whatever it is asked to do.
    const other = new LocalFileStorage({ root });
    const before = await filesUnder(root);
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['createShard', () => other.createShard({ ...ref, tableId: 10 })],
      ['dropShard', () => other.dropShard(ref)],
      ['moveShard', () => other.moveShard(ref, 'live', 'trash')],
      ['markGarbage', () => other.markGarbage(ref)],
      ['unmarkGarbage', () => other.unmarkGarbage(ref)],
      ['deleteGarbage', () => other.deleteGarbage(ref)],
      ['inspect', () => other.inspect(ref)],
    ];
    for (const [name, call] of calls) {
      const err = await rejectionOf(call());
      expect({ name, err: err instanceof QuarantinedNodeError, kind: classifyStorageError(err) }).toEqual({
        name,
        err: true,
        kind: 'permanent',
      });
      expect((err as Error).message).toMatch(
        /^node-1 is quarantined since \S+ \(FatalStorageError in moveShard .*\); inspect it, then run `tablefate quarantine clear node-1`$/,
      );
    }
    expect(await filesUnder(root)).toEqual(before);
    // Other nodes are not affected.
    await other.createShard(healthy);
    expect((await other.inspect(healthy)).area).toBe('live');
    expect((await other.listQuarantined()).map((m) => m.node)).toEqual(['node-1']);

    // The operator looked and cleared it: the half-moved set is finished forwards.
    expect((await other.clearQuarantine('node-1'))?.node).toBe('node-1');
    expect(await other.clearQuarantine('node-1')).toBeNull();
    await other.moveShard(ref, 'live', 'trash');
    expect((await other.inspect(ref)).area).toBe('trash');
  });

  test('a node quarantined already keeps the marker of its first fatal error', async () => {
    await new LocalFileStorage({ root }).createShard(ref);
    await rejectionOf(new LocalFileStorage({ root, renameOps: failingRenames() }).moveShard(ref, 'live', 'trash'));
    const first = await fs.readFile(quarantineFile(root, 'node-1'), 'utf8');
    // The marker blocks the driver before it could fail again, so record a second fatal directly.
    await writeQuarantine(root, 'node-1', 'a later fatal error');
    expect(await fs.readFile(quarantineFile(root, 'node-1'), 'utf8')).toBe(first);
  });

  test('an unreadable marker still quarantines the node', async () => {
    await fs.mkdir(path.join(root, 'node-1'), { recursive: true });
    await fs.writeFile(quarantineFile(root, 'node-1'), '{ not json');
    const err = await rejectionOf(new LocalFileStorage({ root }).createShard(ref));
    expect(err).toBeInstanceOf(QuarantinedNodeError);
    expect((err as Error).message).toMatch(/node-1 is quarantined .*unreadable/);
  });
});

describe('the activity boundary', () => {
  const quiet = new DefaultLogger('ERROR', () => undefined);
  const at = (attempt: number) => new MockActivityEnvironment({ attempt }, { logger: quiet });

  /** Runs one wrapped activity at `attempt` and returns what it threw. */
  async function thrownAt(
    attempt: number,
    fail: () => Promise<void>,
    opts: { storageRetryAttempts?: number; onFatal?: (err: Error) => void } = {},
  ): Promise<unknown> {
    const activities = withFailureMapping(
      { act: fail },
      { onFatal: opts.onFatal ?? (() => undefined), storageRetryAttempts: opts.storageRetryAttempts },
    );
    return rejectionOf(at(attempt).run(activities.act));
  }

  /** A real transient fault: moving a shard that is in neither area. */
  const inNeither = () => new LocalFileStorage({ root }).moveShard({ tableId: 3, shard: 2, node: 'node-0' }, 'live', 'trash');

  test('a permanent real fault becomes a non-retryable StorageFault at the first attempt, naming shard, node and errno', async () => {
    await fs.mkdir(path.join(root, 'node-1'), { recursive: true });
    await fs.writeFile(path.join(root, 'node-1', 'live'), 'not a directory');
    const failure = await thrownAt(1, () => new LocalFileStorage({ root }).createShard({ tableId: 4, shard: 1, node: 'node-1' }));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'StorageFault', nonRetryable: true });
    expect((failure as Error).message).toMatch(/shard t4-s1 on node-1 failed: EEXIST/);
  });

  test('a transient fault is retried as it is until the budget, then ends as "gave up after N attempts"', async () => {
    for (const attempt of [1, 9]) {
      const err = await thrownAt(attempt, inNeither);
      expect({ attempt, isStorageInvariant: err instanceof StorageInvariantError }).toEqual({ attempt, isStorageInvariant: true });
    }
    const last = await thrownAt(10, inNeither);
    expect(last).toMatchObject({ type: 'StorageFault', nonRetryable: true });
    expect((last as Error).message).toMatch(
      /^gave up after 10 attempts: cannot move shard t3-s2 on node-0 from live to trash: it is in neither/,
    );
  });

  test('the budget is the one configured', async () => {
    expect(await thrownAt(2, inNeither, { storageRetryAttempts: 3 })).toBeInstanceOf(StorageInvariantError);
    expect(await thrownAt(3, inNeither, { storageRetryAttempts: 3 })).toMatchObject({ type: 'StorageFault', nonRetryable: true });
    expect((await thrownAt(1, inNeither, { storageRetryAttempts: 1 })) as Error).toMatchObject({
      message: expect.stringMatching(/^gave up after 1 attempt: /) as unknown,
    });
    expect(() => withFailureMapping({}, { onFatal: () => undefined, storageRetryAttempts: 0 })).toThrow(RangeError);
  });

  test('a retryable ApplicationFailure the activity chose itself passes unchanged, whatever the attempt', async () => {
    const busy = ApplicationFailure.retryable('node-1 is not ready yet', 'NotReady');
    const thrown = await thrownAt(1000, () => Promise.reject(busy));
    expect(thrown).toBe(busy);
    expect((thrown as ApplicationFailure).nonRetryable).toBe(false);
  });

  test('errors that are not storage faults (a catalog error) keep being retried, whatever the attempt', async () => {
    const sqlite = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    expect(await thrownAt(1000, () => Promise.reject(sqlite))).toBe(sqlite);
  });

  test('domain errors and a lost lock become non-retryable failures of their own type', async () => {
    expect(await thrownAt(1, () => Promise.reject(new TableExistsError('shop.t exists')))).toMatchObject({
      type: 'TableExists',
      nonRetryable: true,
      message: 'shop.t exists',
    });
    expect(await thrownAt(1, () => Promise.reject(new LockLostError('lost table 1')))).toMatchObject({
      type: 'LockLost',
      nonRetryable: true,
    });
  });

  test('a fatal error stops the worker and stays retryable, never cut off by the budget', async () => {
    const fatals: Error[] = [];
    const fatal = new FatalStorageError('rename set left half renamed');
    const thrown = await thrownAt(50, () => Promise.reject(fatal), { onFatal: (e) => fatals.push(e) });
    expect(thrown).toBe(fatal);
    expect(fatals).toEqual([fatal]);
  });

  test('without a configured budget, the default of 10 attempts applies', async () => {
    const activities = withFailureMapping({ act: inNeither }, { onFatal: () => undefined });
    expect(await rejectionOf(at(9).run(activities.act))).toBeInstanceOf(StorageInvariantError);
    expect(await rejectionOf(at(10).run(activities.act))).toMatchObject({ type: 'StorageFault', nonRetryable: true });
  });
});
