/**
 * Records one history of every path through the workflows into test/histories/, for the replay test.
 * Those files stand for the runs already in the field: they are append-only. Each recording is tagged
 * (`<path>.<tag>.json`) and never overwrites a file; record a new tag when the workflows' command sequence or
 * inputs change, and keep every older one, which today's code must still replay.
 *
 *   npm run record-histories -- <tag>        (for example: npm run record-histories -- v2)
 *   npm run record-histories -- <tag> --only measure,evict     (only these paths: a change that touches no other)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DevServer } from '../../servers/dev-server';
import { findTemporalCli } from '../../servers/go-tools';
import { OPERATIONS, workflowIdFor } from '../../domain/operations';
import { contractWorkflowType, type ContractCallName } from '../../domain/contract';
import { trashTimerQuery } from '../../domain/contracts';
import { Harness, workflowBundle } from './harness';
import { BreakingRenames, RenameGate } from './rename-gate';
import { cancelHeard } from './runs';
import { startCrashingWorker } from './crashing-worker';
import { waitFor } from './wait';
import { writeSet } from './sets-on-disk';
import { startPostgres, withClient } from './postgres';

// (TABLEFATE_HISTORIES_DIR: record into another directory, to try a new scenario without touching test/histories.)
const OUT = process.env.TABLEFATE_HISTORIES_DIR ?? path.resolve(__dirname, '../histories');

async function main(): Promise<void> {
  const tag = process.argv[2];
  const only = process.argv[3] === '--only' ? new Set((process.argv[4] ?? '').split(',')) : undefined;
  if (!tag || !/^[a-z0-9-]+$/.test(tag)) throw new Error('usage: record-histories <tag>, e.g. v2 (lower-case letters, digits, -)');
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-record-'));
  const cli = await findTemporalCli({ stateDir: path.resolve(__dirname, '../../.tablefate') });
  const server = await DevServer.start({ stateDir: dir, headless: true, cliPath: cli });
  // Short lock waits, so that a wait continues as new within seconds (the paths are the same as the defaults'), and
  // a short grace, so that a reconcile pass collects an orphan set.
  const h = await Harness.start({
    address: server.address,
    lockWait: { firstMs: 50, maxMs: 200, attemptsPerRun: 3 },
    orphanGraceSeconds: 1,
  });
  /** The id of the run of `workflowId` running now, once there is one. */
  const firstRunOf = async (workflowId: string) =>
    (await waitFor(
      () =>
        h.temporal.workflow
          .getHandle(workflowId)
          .describe()
          .catch(() => undefined),
      (d) => d !== undefined,
      { what: `a run of ${workflowId}` },
    ))!.runId;
  /** Resolves once `workflowId` has continued as new from run `runId`. */
  const continuedFrom = (workflowId: string, runId: string) =>
    waitFor(
      () => h.temporal.workflow.getHandle(workflowId).describe(),
      (d) => d.runId !== runId,
      { what: `${workflowId} to continue as new` },
    );
  /** Saves the history of a workflow's latest run, once it has closed, or of the run `runId`. */
  const save = async (file: string, workflowId: string, runId?: string) => {
    // (A run named by id has closed already: its workflow goes on in a later run, whose end is not awaited.)
    if (!runId)
      await h.temporal.workflow
        .getHandle(workflowId)
        .result()
        .catch(() => undefined);
    if (only && !only.has(file)) return;
    // The CLI writes the history in the proto3 JSON form that historyFromJSON reads back.
    const { stdout } = await promisify(execFile)(
      cli,
      [
        'workflow',
        'show',
        '--workflow-id',
        workflowId,
        ...(runId ? ['--run-id', runId] : []),
        '--address',
        server.address,
        '--output',
        'json',
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    // An existing history stands for runs in the field and is never rewritten ('wx' makes sure of it).
    const target = path.join(OUT, `${file}.${tag}.json`);
    if (fs.existsSync(target)) {
      console.log(`kept ${path.basename(target)}: recorded before`);
      return;
    }
    await fs.promises.writeFile(target, stdout, { flag: 'wx' });
    console.log(`recorded ${file} (${workflowId})`);
  };
  try {
    await fs.promises.mkdir(OUT, { recursive: true });
    // create that fails on a shard (compensated), then the same create resumed
    h.storage.faults.inject({ op: 'createShard', shard: 1, kind: 'permanent' });
    await h.client.create({ table: 'rec.failed', shards: 2 }).catch(() => undefined);
    await save('create-failed', workflowIdFor.create({ namespace: 'rec', name: 'failed' }, h.catalog.id));
    h.storage.faults.clear();
    const resumed = await h.client.create({ table: 'rec.failed', shards: 2 });
    await save('create', workflowIdFor.create({ namespace: 'rec', name: 'failed' }, h.catalog.id));

    // (since v20) a drop, which ends at TRASHED and starts the trash's expiry; then undelete under a new name (ends
    // the expiry; until v19 the trash run was the drop and its expiry in one, and its histories are named for how it ended)
    await h.client.trash({ table: 'rec.failed', retentionSeconds: 3600 });
    await save('drop', workflowIdFor.trash(resumed.id, h.catalog.id));
    await h.client.undelete({ table: resumed.id, newName: 'rec.restored' });
    await save('trash-restored', workflowIdFor.expiry(resumed.id, h.catalog.id));
    await save('undelete', workflowIdFor.undelete(resumed.id, h.catalog.id));

    // (since v18) an undelete whose move back fails in the call that took its lock: its step takes the move back
    const back = await h.client.create({ table: 'rec.back', shards: 2 });
    await h.client.trash({ table: 'rec.back', retentionSeconds: 3600 });
    h.storage.faults.inject({ op: 'moveShard', tableId: back.id, shard: 1, kind: 'permanent', times: 1 });
    await h.client.undelete({ table: back.id }).catch(() => undefined);
    await save('undelete-compensated', workflowIdFor.undelete(back.id, h.catalog.id));
    h.storage.faults.clear();
    // (since v18) an undelete refused in the call that took its lock: another table has taken its name
    await h.client.create({ table: 'rec.back', shards: 1 });
    await h.client.undelete({ table: back.id }).catch(() => undefined);
    await save('undelete-name-taken', workflowIdFor.undelete(back.id, h.catalog.id));

    // trash, then purge by hand (ends the timer)
    await h.client.trash({ table: 'rec.restored', retentionSeconds: 3600 });
    await h.client.purge({ tableId: resumed.id });
    await save('trash-purged', workflowIdFor.expiry(resumed.id, h.catalog.id));
    await save('purge', workflowIdFor.purge(resumed.id, h.catalog.id));

    // trash with a short retention: the timer fires and the expiry's run purges the table (until v6: a purge run as
    // its child, recorded as purge-expiry)
    const expiring = await h.client.create({ table: 'rec.expiring', shards: 2 });
    await h.client.trash({ table: 'rec.expiring', retentionSeconds: 1 });
    await waitFor(
      () => h.catalog.getTable(expiring.id),
      (t) => t?.state === 'PURGED',
      { what: 'expiry' },
    );
    await save('trash-expired', workflowIdFor.expiry(expiring.id, h.catalog.id));

    // a cancel request while the trash waits: ignored, the timer fires and purges
    const cancelled = await h.client.create({ table: 'rec.cancelled', shards: 1 });
    await h.client.trash({ table: 'rec.cancelled', retentionSeconds: 2 });
    await h.temporal.workflow.getHandle(workflowIdFor.expiry(cancelled.id, h.catalog.id)).cancel();
    await waitFor(
      () => h.catalog.getTable(cancelled.id),
      (t) => t?.state === 'PURGED',
      { what: 'expiry after a cancel request' },
    );
    await save('trash-cancel-ignored', workflowIdFor.expiry(cancelled.id, h.catalog.id));

    // a purge that fails past its point of no return stays PURGING; the next purge goes forward only
    const stuck = await h.client.create({ table: 'rec.stuck', shards: 2 });
    await h.client.trash({ table: 'rec.stuck', retentionSeconds: 3600 });
    h.storage.faults.inject({ op: 'deleteGarbage', tableId: stuck.id, shard: 1, kind: 'permanent' });
    await h.client.purge({ tableId: stuck.id }).catch(() => undefined);
    await save('purge-failed-past-no-return', workflowIdFor.purge(stuck.id, h.catalog.id));
    h.storage.faults.clear();
    await h.client.purge({ tableId: stuck.id });
    await save('purge-resumed-forward-only', workflowIdFor.purge(stuck.id, h.catalog.id));

    // a create whose worker died after its commit and release ran in a workflow task that was then lost:
    // the next worker's task answers them from the catalog's journal
    await h.stopWorker();
    const bundleFile = path.join(dir, 'bundle.js');
    await fs.promises.writeFile(bundleFile, (await workflowBundle()).code);
    // (The commit, a create's second call of its steps, releases the locks too: the kill right after it is after the release.)
    const crashing = await startCrashingWorker({
      on: h,
      bundleFile,
      activity: 'runStepsHere',
      env: { CRASH_ON_CALL: '2' },
    });
    const lost = h.client.create({ table: 'rec.lost', shards: 2 });
    await crashing.exited;
    await h.startWorker();
    await lost;
    await save('create-lost-task', workflowIdFor.create({ namespace: 'rec', name: 'lost' }, h.catalog.id));
    // (since v23) a create cancelled while its first task, whose call prepared it and made its shards, was lost: the next
    // worker makes the first call again (the journal answers it), then takes the cancel, and takes it all back
    await h.stopWorker();
    const crashingFirst = await startCrashingWorker({ on: h, bundleFile, activity: 'runStepsHere', env: { CRASH_ON_CALL: '1' } });
    const cancelledLost = h.client.create({ table: 'rec.cancelled_lost', shards: 2 }).catch(() => undefined);
    await crashingFirst.exited;
    const cancelledId = workflowIdFor.create({ namespace: 'rec', name: 'cancelled_lost' }, h.catalog.id);
    await h.temporal.workflow.getHandle(cancelledId).cancel();
    await h.startWorker();
    await cancelledLost;
    await save('create-cancelled-lost-task', cancelledId);

    // a trash whose move fails: compensated back to READY
    const failing = await h.client.create({ table: 'rec.failing', shards: 2 });
    h.storage.faults.inject({ op: 'moveShard', tableId: failing.id, shard: 1, kind: 'permanent', times: 1 });
    await h.client.trash({ table: 'rec.failing', retentionSeconds: 3600 }).catch(() => undefined);
    await save('trash-compensated', workflowIdFor.trash(failing.id, h.catalog.id));
    h.storage.faults.clear();

    // a purge that waits for a busy table: tries on timers, continues as new, then purges
    const holderTable = await h.client.create({ table: 'rec.holder', shards: 1 });
    await h.client.trash({ table: 'rec.holder', retentionSeconds: 3600 });
    const holderRun = await h.temporal.workflow.getHandle(workflowIdFor.expiry(holderTable.id, h.catalog.id)).describe();
    const holder = { workflowId: holderRun.workflowId, runId: holderRun.runId };
    const waiting = await h.client.create({ table: 'rec.waiting', shards: 2 });
    await h.client.trash({ table: 'rec.waiting', retentionSeconds: 3600 });
    await h.catalog.acquireLock(`table:${waiting.id}`, holder, Date.now(), () => Promise.resolve(false));
    const purging = h.client.purge({ tableId: waiting.id });
    const purgeId = workflowIdFor.purge(waiting.id, h.catalog.id);
    const firstRun = await firstRunOf(purgeId);
    await continuedFrom(purgeId, firstRun);
    await save('purge-lock-wait-continued', purgeId, firstRun);
    await h.catalog.releaseLocks(holder);
    await purging;
    await save('purge-after-lock-wait', purgeId);

    // (since v8) a trash that waits for a busy table: continues as new, then trashes and answers its caller
    const busy = await h.client.create({ table: 'rec.busy', shards: 2 });
    await h.catalog.acquireLock(`table:${busy.id}`, holder, Date.now(), () => Promise.resolve(false));
    const trashing = h.client.trash({ table: 'rec.busy', retentionSeconds: 3600 });
    const busyTrashId = workflowIdFor.trash(busy.id, h.catalog.id);
    const firstTrashRun = await firstRunOf(busyTrashId);
    await continuedFrom(busyTrashId, firstTrashRun);
    await save('trash-lock-wait-continued', busyTrashId, firstTrashRun);
    await h.catalog.releaseLocks(holder);
    await trashing;
    await h.client.purge({ tableId: busy.id });
    await save('trash-after-lock-wait', busyTrashId);

    // an expiry whose purge fails once: the trash tries again (after 10 s) and purges
    const retried = await h.client.create({ table: 'rec.retried', shards: 2 });
    h.storage.faults.inject({ op: 'markGarbage', tableId: retried.id, shard: 1, kind: 'permanent', times: 1 });
    await h.client.trash({ table: 'rec.retried', retentionSeconds: 1 });
    await waitFor(
      () => h.catalog.getTable(retried.id),
      (t) => t?.state === 'PURGED',
      { what: 'the retried expiry', timeoutMs: 60_000 },
    );
    await save('trash-expiry-retried', workflowIdFor.expiry(retried.id, h.catalog.id));
    h.storage.faults.clear();

    // an expiry's run terminated while it waits; the reconciler re-arms it, and it purges at expiry
    const rearmed = await h.client.create({ table: 'rec.rearmed', shards: 2 });
    await h.client.trash({ table: 'rec.rearmed', retentionSeconds: 2 });
    await h.temporal.workflow.getHandle(workflowIdFor.expiry(rearmed.id, h.catalog.id)).terminate('recording: a lost trash run');
    const reconcileId = `reconcile@${h.catalog.id}-recording`;
    await h.temporal.workflow.execute(OPERATIONS.reconcile.workflowType, {
      workflowId: reconcileId,
      taskQueue: h.taskQueue,
      args: [{ catalogId: h.catalog.id, mode: 'repair' }],
    });
    await save('reconcile', reconcileId);
    await waitFor(
      () => h.catalog.getTable(rearmed.id),
      (t) => t?.state === 'PURGED',
      { what: 'the re-armed expiry' },
    );
    await save('trash-rearmed', workflowIdFor.expiry(rearmed.id, h.catalog.id));

    // a trash whose worker died right after it marked the table TRASHING, and whose run was then terminated:
    // the reconciler runs the trash again, which resumes from TRASHING (with the retention the lost run asked for)
    const resumed2 = await h.client.create({ table: 'rec.resumed', shards: 2 });
    await h.stopWorker();
    const dying = await startCrashingWorker({
      on: h,
      bundleFile,
      // (A drop's first call of its steps marks it TRASHING and moves its shards.)
      activity: 'runStepsHere',
    });
    const lostTrash = h.client.trash({ table: 'rec.resumed', retentionSeconds: 2 }).catch(() => undefined);
    await dying.exited;
    await h.temporal.workflow.getHandle(workflowIdFor.trash(resumed2.id, h.catalog.id)).terminate('recording: a worker lost mid-trash');
    await lostTrash;
    await h.startWorker();
    // (since v8, this pass recorded) with an orphan set past its grace beside it: the pass releases the lost run's
    // lock, resumes its trash and collects the orphan
    await writeSet(path.join(h.home, 'storage'), { tableId: resumed2.id + 500, shard: 0, node: 'node-0' }, 'live');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const repairsId = `reconcile@${h.catalog.id}-recording-repairs`;
    await h.temporal.workflow.execute(OPERATIONS.reconcile.workflowType, {
      workflowId: repairsId,
      taskQueue: h.taskQueue,
      args: [{ catalogId: h.catalog.id, mode: 'repair' }],
    });
    await save('reconcile-repairs', repairsId);
    await waitFor(
      () => h.catalog.getTable(resumed2.id),
      (t) => t?.state === 'PURGED',
      { what: 'the resumed trash to expire' },
    );
    await save('trash-resumed', workflowIdFor.trash(resumed2.id, h.catalog.id));
    await save('trash-resumed-expired', workflowIdFor.expiry(resumed2.id, h.catalog.id));

    // (since v21) a drop of several as one, terminated while a lease held it: the pass resumes it once, as one, for the
    // two tables it finds stuck
    const pairA = await h.client.create({ table: 'rec.pair_a', shards: 1 });
    const pairB = await h.client.create({ table: 'rec.pair_b', shards: 1 });
    const pairLease = await h.client.acquireLease(pairB.id, { ttlSeconds: 300, holder: 'recording' });
    const pairDrop = h.client.trash({ table: 'rec.pair_a', together: ['rec.pair_b'], retentionSeconds: 3600 }).catch(() => undefined);
    await waitFor(
      () => h.catalog.getTable(pairB.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the drop of the pair to drain' },
    );
    await h.temporal.workflow.getHandle(workflowIdFor.trash(pairA.id, h.catalog.id)).terminate('recording: a drop of two cut short');
    await pairDrop;
    await h.client.releaseLease(pairLease.id);
    const togetherId = `reconcile@${h.catalog.id}-recording-together`;
    await h.temporal.workflow.execute(OPERATIONS.reconcile.workflowType, {
      workflowId: togetherId,
      taskQueue: h.taskQueue,
      args: [{ catalogId: h.catalog.id, mode: 'repair' }],
    });
    await save('reconcile-together', togetherId);
    // (since v21) a recall of tables dropped as one, refused under the locks: one of them was purged after the call read it
    const units = [];
    for (const name of ['unit_a', 'unit_b']) units.push(await h.client.create({ table: `rec.${name}`, shards: 1 }));
    await h.client.trash({ table: 'rec.unit_a', together: ['rec.unit_b'], retentionSeconds: 3600 });
    const unitPlan = await h.client.planCall('undelete', { table: units[0]!.id });
    await h.client.purge({ tableId: units[1]!.id });
    await h.client
      .executeCall('undelete', (unitPlan as { plan: unknown }).plan, { requestId: 'recording-unit-changed' })
      .catch(() => undefined);
    await save('undelete-unit-changed', workflowIdFor.undelete(units[0]!.id, h.catalog.id));

    // (since v7) a trash whose committing task was lost while a purge ended it (until v19 the end was heard before the
    // trash run knew its drop time: trash-ended-before-armed); since v20, the drop's task that committed, lost and
    // made again, and the expiry it starts, ended by the purge (drop-lost-task)
    const ended = await h.client.create({ table: 'rec.ended', shards: 2 });
    await h.stopWorker();
    const committing = await startCrashingWorker({
      on: h,
      bundleFile,
      // (A drop's second call of its steps commits it.)
      activity: 'runStepsHere',
      env: { CRASH_ON_CALL: '2' },
    });
    const endedTrash = h.client.trash({ table: 'rec.ended', retentionSeconds: 3600 });
    await committing.exited;
    await h.startWorker();
    await h.client.purge({ tableId: ended.id });
    await endedTrash;
    await save('drop-lost-task', workflowIdFor.trash(ended.id, h.catalog.id));
    await save('trash-ended-after-lost-task', workflowIdFor.expiry(ended.id, h.catalog.id));

    // (since v9) a rename: one compare-and-set under the table's lock and the new name's; then one refused, the name
    // taken; then one that waits for a busy table, continues as new, and renames
    const named = await h.client.create({ table: 'rec.named', shards: 2 });
    await h.client.rename({ table: 'rec.named', newName: 'rec.renamed' });
    await save('rename', workflowIdFor.rename(named.id, h.catalog.id));
    await h.client.create({ table: 'rec.taken', shards: 1 });
    await h.client.rename({ table: named.id, newName: 'rec.taken' }).catch(() => undefined);
    await save('rename-name-taken', workflowIdFor.rename(named.id, h.catalog.id));
    const waited = await h.client.create({ table: 'rec.waited', shards: 1 });
    await h.catalog.acquireLock(`table:${waited.id}`, holder, Date.now(), () => Promise.resolve(false));
    const renaming = h.client.rename({ table: 'rec.waited', newName: 'rec.waited_renamed' });
    const renameId = workflowIdFor.rename(waited.id, h.catalog.id);
    const firstRenameRun = await firstRunOf(renameId);
    await continuedFrom(renameId, firstRenameRun);
    await save('rename-lock-wait-continued', renameId, firstRenameRun);
    await h.catalog.releaseLocks(holder);
    await renaming;
    await save('rename-after-lock-wait', renameId);

    // (since v22) a truncate into the trash: the rows to an entry of their own, the table live; one taken back at its
    // drain deadline, a lease held; one that waits for the lease's release, then goes on
    const truncated = await h.client.create({ table: 'rec.truncated', shards: 2 });
    await h.client.truncate({ table: 'rec.truncated', retentionSeconds: 3600 });
    await save('truncate', workflowIdFor.truncate(truncated.id, h.catalog.id));
    const truncateLease = await h.client.acquireLease(truncated.id, { ttlSeconds: 300 });
    await h.client.truncate({ table: truncated.id, drainTimeoutSeconds: 1 }).catch(() => undefined);
    await save('truncate-drain-timeout', workflowIdFor.truncate(truncated.id, h.catalog.id));
    const truncating = h.client.truncate({ table: truncated.id, retentionSeconds: 3600 });
    await waitFor(
      () => h.catalog.getTable(truncated.id),
      (t) => t?.state === 'TRUNCATING',
      { what: 'the truncate to wait for the lease' },
    );
    await h.client.releaseLease(truncateLease.id);
    await truncating;
    await save('truncate-after-lease', workflowIdFor.truncate(truncated.id, h.catalog.id));
    // ... and its entry recalled in place: the table (with the rows written since) dropped, the entry recalled under its
    // name, each a run of its own under this run's lock of the name
    const inPlace = await h.client.truncate({ table: 'rec.truncated', retentionSeconds: 3600 });
    await h.client.undelete({ table: inPlace.id, inPlace: true });
    await save('recall-in-place', workflowIdFor.recallInPlace(inPlace.id, h.catalog.id));

    // (since v6) storage served by the nodes' own workers: the first shard change finds none of the nodes served
    // in the orchestrating worker and hands them to the nodes' queues; the run's later changes go there at once
    const remote = await Harness.start({ address: server.address, storage: 'remote' });
    try {
      const onNodes = await remote.client.create({ table: 'rec.nodes', shards: 3 });
      await save('create-on-node-queues', workflowIdFor.create({ namespace: 'rec', name: 'nodes' }, remote.catalog.id));
      await remote.client.trash({ table: 'rec.nodes', retentionSeconds: 3600 });
      await remote.client.purge({ tableId: onNodes.id });
      await save('purge-on-node-queues', workflowIdFor.purge(onNodes.id, remote.catalog.id));
    } finally {
      await remote.close();
    }

    // (since v6) a shard change in the workflow task meets a fatal storage error: the worker stops, the change
    // waits on the node's queue, and a worker started once the quarantine is cleared finishes the trash
    const renames = new BreakingRenames();
    const fatal = await Harness.start({ address: server.address, renameOps: renames });
    try {
      const broken = await fatal.client.create({ table: 'rec.fatal', shards: 1 });
      renames.armed = true;
      const trashing = fatal.client.trash({ table: 'rec.fatal', retentionSeconds: 3600 }, { timeoutMs: 60_000 });
      await fatal.workerStopped();
      renames.armed = false;
      await fatal.storage.clearQuarantine(broken.placement[0]!.node);
      await fatal.startWorker();
      await trashing;
      await fatal.client.purge({ tableId: broken.id });
      await save('trash-storage-stopped-here', workflowIdFor.trash(broken.id, fatal.catalog.id));
    } finally {
      await fatal.close();
    }

    // (since v8) an expiry whose purge keeps failing: past its tries for one run the trash continues as new,
    // re-armed on the same drop time, and a later run purges
    const paced = await Harness.start({ address: server.address, expiryRetry: { firstMs: 100, maxMs: 200, attemptsPerRun: 2 } });
    try {
      const stubborn = await paced.client.create({ table: 'rec.stubborn', shards: 2 });
      paced.storage.faults.inject({ op: 'markGarbage', tableId: stubborn.id, shard: 0, kind: 'permanent', times: 3 });
      await paced.client.trash({ table: 'rec.stubborn', retentionSeconds: 1 });
      const stubbornId = workflowIdFor.expiry(stubborn.id, paced.catalog.id);
      await waitFor(
        () =>
          paced.temporal.workflow
            .getHandle(stubbornId)
            .describe()
            .catch(() => undefined),
        (d) => d !== undefined,
        { what: 'the expiry run' },
      );
      const armed = await paced.temporal.workflow.getHandle(stubbornId).describe();
      await waitFor(
        () => paced.catalog.getTable(stubborn.id),
        (t) => t?.state === 'PURGED',
        { what: 'the stubborn expiry' },
      );
      await save('trash-expiry-continued', stubbornId, armed.runId);
      await save('trash-rearmed-expiry-retried', stubbornId);
    } finally {
      await paced.close();
    }

    // (since v9) a trash cancelled while it moves its shards: the move (an activity per node) hears the cancel, stops
    // and answers cancelled; then the undo moves back what it had moved, and the run ends cancelled
    const gate = new RenameGate();
    const slow = await Harness.start({ address: server.address, renameOps: gate });
    /** Trashes a new table of `shards` shards, cancels the trash while its move waits at the gate, and saves the run. */
    const cancelWhileMoving = async (name: string, shards: number, file: string) => {
      const table = await slow.client.create({ table: `rec.${name}`, shards });
      const run = slow.temporal.workflow.getHandle(workflowIdFor.trash(table.id, slow.catalog.id));
      gate.hold();
      const trashing = slow.client.trash({ table: `rec.${name}`, retentionSeconds: 3600 }).catch(() => undefined);
      await gate.someoneWaiting(table.id);
      await run.cancel();
      await cancelHeard(run);
      gate.open();
      await trashing;
      await save(file, run.workflowId);
      return table;
    };
    try {
      await cancelWhileMoving('moving', 2, 'trash-cancelled-while-moving');
      // (since v14) the same with more shards than one call changes (16): the call under way ends, the cancel is
      // taken before the next, and the undo moves back what the first call moved
      const many = await cancelWhileMoving('many', 20, 'trash-cancelled-between-calls');

      // (since v14) a recall of more shards than one call changes: two calls, the progress moving between them
      await slow.client.trash({ table: 'rec.many', retentionSeconds: 3600 });
      await slow.client.undelete({ table: many.id });
      await save('undelete-in-calls', workflowIdFor.undelete(many.id, slow.catalog.id));

      // (since v15) a purge of more shards than one call changes: every shard marked first, in two calls, then deleted
      // in two more, the second also committing PURGED
      await slow.client.trash({ table: 'rec.many', retentionSeconds: 3600 });
      await slow.client.purge({ tableId: many.id });
      await save('purge-in-calls', workflowIdFor.purge(many.id, slow.catalog.id));

      // (since v19) a purge cancelled past its point of no return: the cancel arrives while its second call marks the
      // last shards garbage; that call goes on into the deletes (the point of no return joins any call), so the run
      // takes no cancel from there and ends PURGED
      const late = await slow.client.create({ table: 'rec.late', shards: 20 });
      await slow.client.trash({ table: 'rec.late', retentionSeconds: 3600 });
      const lateRun = slow.temporal.workflow.getHandle(workflowIdFor.purge(late.id, slow.catalog.id));
      gate.hold(16);
      const purging = slow.client.purge({ tableId: late.id });
      await gate.someoneWaiting(late.id);
      await lateRun.cancel();
      await cancelHeard(lateRun);
      gate.open();
      const lateEnd = await purging;
      if (lateEnd.state !== 'PURGED') throw new Error(`the purge cancelled past its point of no return ended ${lateEnd.state}`);
      await save('purge-cancelled-past-no-return', lateRun.workflowId);

      // (since v18) a recall cancelled while the call that took its lock moves its shards back: that call ends, the
      // cancel is taken at the commit, and the undo takes every shard back to the trash
      const recalled = await slow.client.create({ table: 'rec.recalling', shards: 2 });
      await slow.client.trash({ table: 'rec.recalling', retentionSeconds: 3600 });
      const recallRun = slow.temporal.workflow.getHandle(workflowIdFor.undelete(recalled.id, slow.catalog.id));
      gate.hold();
      const recalling = slow.client.undelete({ table: recalled.id }).catch(() => undefined);
      await gate.someoneWaiting(recalled.id);
      await recallRun.cancel();
      await cancelHeard(recallRun);
      gate.open();
      await recalling;
      await save('undelete-cancelled', recallRun.workflowId);

      // (since v18) a create cancelled while its prepare's call makes its first shards: the same, to CREATE_FAILED
      const createName = { namespace: 'rec', name: 'creating' };
      const createRun = slow.temporal.workflow.getHandle(workflowIdFor.create(createName, slow.catalog.id));
      gate.hold();
      const creating = slow.client.create({ table: 'rec.creating', shards: 2 }).catch(() => undefined);
      const prepared = await waitFor(
        () => slow.catalog.findByName(createName),
        (t) => t !== undefined,
        { what: 'the create to prepare its table' },
      );
      await gate.someoneWaiting(prepared!.id);
      await createRun.cancel();
      await cancelHeard(createRun);
      gate.open();
      await creating;
      await save('create-cancelled', createRun.workflowId);

      // (since v24) a drop's expiry, started beside its move, begun while the move still waits at the gate: it reads the
      // table TRASHING with its drop time and looks again until the drop commits; then it waits for the expiry, and a
      // recall ends it. And one whose drop is cancelled while it looks: the table found READY again ends it.
      const expiryWhileMoving = async (name: string, then: 'commit' | 'cancel') => {
        const table = await slow.client.create({ table: `rec.${name}`, shards: 2 });
        const expiry = slow.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, slow.catalog.id));
        const drop = slow.temporal.workflow.getHandle(workflowIdFor.trash(table.id, slow.catalog.id));
        gate.hold();
        const dropping = slow.client.trash({ table: `rec.${name}`, retentionSeconds: 3600 }).catch(() => undefined);
        await gate.someoneWaiting(table.id);
        await waitFor(
          () => expiry.query(trashTimerQuery).catch(() => undefined),
          (state) => state !== undefined,
          { what: `the expiry of ${name} to begin while its shards move` },
        );
        if (then === 'cancel') {
          await drop.cancel();
          await cancelHeard(drop);
        }
        gate.open();
        await dropping;
        if (then === 'commit') {
          await waitFor(
            () => expiry.query(trashTimerQuery),
            (state) => state.expireAt !== null,
            { what: `the expiry of ${name} to arm once its drop committed` },
          );
          await slow.client.undelete({ table: table.id });
        }
        return expiry.workflowId;
      };
      await save('trash-expiry-waits-for-commit', await expiryWhileMoving('longmove', 'commit'));
      await save('trash-expiry-move-taken-back', await expiryWhileMoving('takenback', 'cancel'));
    } finally {
      gate.open();
      await slow.close();
    }

    // (since v10) the sizes of tables (describe, ls): one read-only activity per node, on the node's queue
    const sized = await h.client.create({ table: 'rec.sized', shards: 2 });
    const measureId = OPERATIONS.measure.workflowId('rec', h.catalog.id);
    await h.temporal.workflow.execute(OPERATIONS.measure.workflowType, {
      workflowId: measureId,
      taskQueue: h.taskQueue,
      args: [{ catalogId: h.catalog.id, tables: [{ id: sized.id, placement: sized.placement }] }],
    });
    await save('measure', measureId);

    // (since v10) an adopt, with the PostgreSQL driver: create's workflow, whose shard step records the table it finds
    const postgres = await startPostgres();
    const node = await postgres.freshDatabase('rec');
    const adopter = await Harness.start({ address: server.address, postgresNodes: [node] });
    try {
      await withClient(node, (c) => c.query('CREATE SCHEMA legacy; CREATE TABLE legacy.kept (id int)'));
      await adopter.client.adopt({ table: 'legacy.kept' });
      await save('adopt', workflowIdFor.adopt({ namespace: 'legacy', name: 'kept' }, adopter.catalog.id));
      // (since v21) a table not kept yet, adopted and dropped in one run; and one a view depends on, taken back
      await withClient(node, (c) =>
        c.query(
          `CREATE TABLE legacy.loose (id int); CREATE TABLE legacy.viewed (id int); CREATE VIEW legacy.viewed_v AS SELECT id FROM legacy.viewed`,
        ),
      );
      await adopter.client.trash({ table: 'legacy.loose', node: 'node-0', retentionSeconds: 3600 });
      await save('adopt-drop', workflowIdFor.adoptTrash({ namespace: 'legacy', name: 'loose' }, adopter.catalog.id));
      await adopter.client.trash({ table: 'legacy.viewed', node: 'node-0' }).catch(() => undefined);
      await save('adopt-drop-refused', workflowIdFor.adoptTrash({ namespace: 'legacy', name: 'viewed' }, adopter.catalog.id));
      // (since v21) a rename that renames the table itself, and one taken back: the new name held on the node by a
      // table tablefate did not place
      const kept = await adopter.catalog.findByName({ namespace: 'legacy', name: 'kept' });
      await adopter.client.rename({ table: 'legacy.kept', newName: 'legacy.kept_2025' });
      await save('rename-postgres', workflowIdFor.rename(kept!.id, adopter.catalog.id));
      await withClient(node, (c) => c.query('CREATE TABLE legacy.stranger (id int)'));
      await adopter.client.rename({ table: 'legacy.kept_2025', newName: 'legacy.stranger' }).catch(() => undefined);
      await save('rename-postgres-taken-back', workflowIdFor.rename(kept!.id, adopter.catalog.id));
      // (since v21) a drop with cascade: the table's view moved along, a live table's key to it detached; and its recall
      await withClient(node, (c) =>
        c.query(`CREATE TABLE legacy.parent (id int PRIMARY KEY); CREATE VIEW legacy.parent_v AS SELECT id FROM legacy.parent;
                 CREATE TABLE legacy.child (parent_id int REFERENCES legacy.parent (id))`),
      );
      const parent = await adopter.client.adopt({ table: 'legacy.parent' });
      await adopter.client.trash({ table: 'legacy.parent', cascade: true, retentionSeconds: 3600 });
      await save('drop-cascade', workflowIdFor.trash(parent.id, adopter.catalog.id));
      await adopter.client.undelete({ table: parent.id });
      await save('undelete-family', workflowIdFor.undelete(parent.id, adopter.catalog.id));
      // (since v23) a truncate with cascade: the tables whose keys reference it found on the node (one read on its queue),
      // then all of them truncated as one, each into an entry of its own
      await withClient(node, (c) =>
        c.query(`CREATE TABLE legacy.orders (id int PRIMARY KEY); CREATE TABLE legacy.lines (order_id int REFERENCES legacy.orders (id));
                 INSERT INTO legacy.orders VALUES (1); INSERT INTO legacy.lines VALUES (1)`),
      );
      const orders = await adopter.client.adopt({ table: 'legacy.orders' });
      await adopter.client.adopt({ table: 'legacy.lines' });
      await adopter.client.truncate({ table: 'legacy.orders', cascade: true, retentionSeconds: 3600 });
      await save('truncate-cascade', workflowIdFor.truncate(orders.id, adopter.catalog.id));
      // (since v21) a drop's dry run: one read-only activity per node, on the node's queue
      const planId = OPERATIONS.planDrop.workflowId('rec', adopter.catalog.id);
      await adopter.temporal.workflow.execute(OPERATIONS.planDrop.workflowType, {
        workflowId: planId,
        taskQueue: adopter.taskQueue,
        args: [{ catalogId: adopter.catalog.id, tableId: parent.id, placement: parent.placement, cascade: true }],
      });
      await save('plan-drop', planId);
      // (since v21) a partitioned table's drop: its partitions moved along, cascade or not
      await withClient(node, (c) =>
        c.query(`CREATE TABLE legacy.events (at date NOT NULL) PARTITION BY RANGE (at);
                 CREATE TABLE legacy.events_2026 PARTITION OF legacy.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')`),
      );
      const partitioned = await adopter.client.adopt({ table: 'legacy.events' });
      await adopter.client.trash({ table: 'legacy.events', retentionSeconds: 3600 });
      await save('drop-partitioned', workflowIdFor.trash(partitioned.id, adopter.catalog.id));
      // (since v21) several tables dropped as one, one keyed to the other (one transaction on their node), and recalled
      // together by the one that references the other
      await withClient(node, (c) =>
        c.query(`CREATE TABLE legacy.branches (id int PRIMARY KEY);
                 CREATE TABLE legacy.accounts (id int PRIMARY KEY, branch int REFERENCES legacy.branches (id))`),
      );
      const branches = await adopter.client.adopt({ table: 'legacy.branches' });
      const accounts = await adopter.client.adopt({ table: 'legacy.accounts' });
      await adopter.client.trash({ table: 'legacy.accounts', together: ['legacy.branches'], retentionSeconds: 3600 });
      await save('drop-together', workflowIdFor.trash(Math.min(branches.id, accounts.id), adopter.catalog.id));
      await adopter.client.undelete({ table: accounts.id });
      await save('undelete-together', workflowIdFor.undelete(accounts.id, adopter.catalog.id));
      // (since v21) a whole namespace dropped as one, its schema set aside with its tables, and recalled into another
      await withClient(node, (c) =>
        c.query(`CREATE SCHEMA whole; CREATE TABLE whole.a (id int PRIMARY KEY); CREATE TABLE whole.b (a int REFERENCES whole.a (id));
                 CREATE SEQUENCE whole.tickets`),
      );
      const wholeA = await adopter.client.adopt({ table: 'whole.a' });
      await adopter.client.adopt({ table: 'whole.b' });
      await adopter.client.trash({ namespace: 'whole', retentionSeconds: 3600 });
      await save('drop-namespace', workflowIdFor.trash(wholeA.id, adopter.catalog.id));
      await adopter.client.undelete({ table: wholeA.id, newNamespace: 'whole_old' });
      await save('undelete-namespace', workflowIdFor.undelete(wholeA.id, adopter.catalog.id));
    } finally {
      await adopter.close();
      await postgres.stop();
    }

    // (since v11) a drop that waits in DRAINING for a lease, which its release ends; the lease's runs; the trash then
    // recorded once its retention, shortened into the past, has purged the table through the same run
    const leased = await h.client.create({ table: 'rec.leased', shards: 2 });
    const lease = await h.client.acquireLease(leased.id, { ttlSeconds: 300, holder: 'recorder' });
    await h.client.renewLease(lease.id, { ttlSeconds: 600 });
    const draining = h.client.trash({ table: 'rec.leased', retentionSeconds: 3600 });
    await waitFor(
      () => h.catalog.getTable(leased.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the drop to drain' },
    );
    await h.client.releaseLease(lease.id);
    await draining;
    await save('lease-acquire', OPERATIONS.lease.workflowId(`${lease.id}:acquire`, h.catalog.id));
    // A renewal's and a release's run ids carry a request id of their own: found by their prefix.
    for (const action of ['renew', 'release']) {
      const prefix = `lease:${lease.id}:${action}:`;
      const id = await waitFor(
        async () => {
          for await (const run of h.temporal.workflow.list({ query: `WorkflowType = '${OPERATIONS.lease.workflowType}'` }))
            if (run.workflowId.startsWith(prefix)) return run.workflowId;
          return undefined;
        },
        (found) => found !== undefined,
        { what: `the lease's ${action} run in visibility` },
      );
      await save(`lease-${action}`, id!);
    }
    await h.client.setRetention({ table: leased.id, retentionSeconds: 1 });
    await waitFor(
      () => h.catalog.getTable(leased.id),
      (t) => t?.state === 'PURGED',
      { what: 'the shortened retention to purge' },
    );
    await save('drop-drained', workflowIdFor.trash(leased.id, h.catalog.id));
    await save('trash-drained-retention-shortened', workflowIdFor.expiry(leased.id, h.catalog.id));

    // (since v11) two retention changes that reach the trash run in one workflow task: made in turn by its wait, the
    // second into the past, which purges the table
    const twice = await h.client.create({ table: 'rec.twice', shards: 1 });
    await h.client.trash({ table: 'rec.twice', retentionSeconds: 3600 });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await h.stopWorker();
    const longer = h.client.setRetention({ table: twice.id, retentionSeconds: 7200 }, { timeoutMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const past = h.client.setRetention({ table: twice.id, retentionSeconds: 1 }, { timeoutMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await h.startWorker();
    await Promise.all([longer, past]);
    await save('trash-two-retentions-one-task', workflowIdFor.expiry(twice.id, h.catalog.id));

    // (since v11) a drop whose drain passes its deadline: TableBusy, taken back to READY
    const busyLease = await h.client.create({ table: 'rec.busy_lease', shards: 1 });
    const kept = await h.client.acquireLease(busyLease.id, { ttlSeconds: 300 });
    await h.client.trash({ table: 'rec.busy_lease', drainTimeoutSeconds: 1 }).catch(() => undefined);
    await save('trash-drain-busy', workflowIdFor.trash(busyLease.id, h.catalog.id));
    await h.client.releaseLease(kept.id);

    // (since v12) a drop cancelled while it drains (`tablefate cancel`): taken back to READY, the lease kept
    const cancelledDrain = await h.client.create({ table: 'rec.cancelled_drain', shards: 1 });
    const drainLease = await h.client.acquireLease(cancelledDrain.id, { ttlSeconds: 300 });
    const cancelledDrop = h.client.trash({ table: 'rec.cancelled_drain', drainTimeoutSeconds: 300 }).catch(() => undefined);
    await waitFor(
      () => h.catalog.getTable(cancelledDrain.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the drop to drain' },
    );
    await h.client.cancel({ workflowId: workflowIdFor.trash(cancelledDrain.id, h.catalog.id) });
    await cancelledDrop;
    await save('trash-cancelled-while-draining', workflowIdFor.trash(cancelledDrain.id, h.catalog.id));
    await h.client.releaseLease(drainLease.id);

    // (since v11) a held table: its hold, a trash whose expiry finds it held, the release that wakes it, the purge
    const heldTable = await h.client.create({ table: 'rec.held', shards: 2 });
    await h.client.hold({ table: heldTable.id, reason: 'recording' });
    await save('hold', workflowIdFor.hold(heldTable.id, h.catalog.id));
    await h.client.trash({ table: 'rec.held', retentionSeconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await h.client.release({ table: heldTable.id });
    await save('release', workflowIdFor.release(heldTable.id, h.catalog.id));
    await waitFor(
      () => h.catalog.getTable(heldTable.id),
      (t) => t?.state === 'PURGED',
      { what: 'the released table to be purged' },
    );
    await save('trash-held-then-released', workflowIdFor.expiry(heldTable.id, h.catalog.id));

    // (since v11) the trash switched off in a namespace: a drop purges at once in its own run (and the expiry it
    // started is ended by that purge)
    await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'recoff' });
    const off = await h.client.create({ table: 'recoff.gone', shards: 2 });
    await h.client.trash({ table: 'recoff.gone' });
    await save('trash-disabled', workflowIdFor.trash(off.id, h.catalog.id));
    await save('trash-disabled-expiry', workflowIdFor.expiry(off.id, h.catalog.id));

    // (since v11) a space cap: a setting's run starts the eviction, which purges the oldest trashed table by a purge run
    const capped = await h.client.create({ table: 'reccap.old', shards: 2 });
    await h.client.create({ table: 'reccap.new', shards: 1 });
    await h.client.trash({ table: 'reccap.old' });
    await h.client.trash({ table: 'reccap.new' });
    await h.client.setSetting({ key: 'trash.maxBytes', value: '1', namespace: 'reccap' });
    await waitFor(
      () => h.catalog.getTable(capped.id),
      (t) => t?.state === 'PURGED',
      { what: 'the space cap to purge the oldest' },
    );
    const evictId = workflowIdFor.evict(h.catalog.id);
    await h.client.unsetSetting({ key: 'trash.maxBytes', namespace: 'reccap' });
    await save('evict', evictId);
    await save('purge-for-space', workflowIdFor.purge(capped.id, h.catalog.id));
    // (Visibility lags a moment behind the runs.)
    const configured = await waitFor(
      async () => {
        for await (const run of h.temporal.workflow.list({ query: `WorkflowType = '${OPERATIONS.configure.workflowType}'` }))
          return run.workflowId;
        return undefined;
      },
      (id) => id !== undefined,
      { what: 'a configure run in visibility' },
    );
    await save('configure', configured!);

    // (since v16) the contract's calls by type name: a write planned then executed, a read answered by its plan, and a
    // write refused by its plan
    const contractCall = (name: ContractCallName, request: unknown, workflowId: string) =>
      h.temporal.workflow
        .execute(contractWorkflowType(name), { taskQueue: h.taskQueue, workflowId, args: [request] })
        .catch(() => undefined);
    const ordered = await h.client.create({ table: 'reccontract.orders', shards: 2 });
    await contractCall('trash', { table: 'reccontract.orders', retentionSeconds: 3600 }, 'rec-contract-trash');
    await save('contract-write', 'rec-contract-trash');
    await contractCall('describe', { table: ordered.id }, 'rec-contract-describe');
    await save('contract-read', 'rec-contract-describe');
    await contractCall('purge', { tableId: 999_999_999 }, 'rec-contract-refused');
    await save('contract-refused', 'rec-contract-refused');
    // ... and a call cancelled while its drop waits for a lease: the drop is cancelled, then the call
    const drained = await h.client.create({ table: 'reccontract.leased', shards: 1 });
    const contractLease = await h.client.acquireLease(drained.id, { ttlSeconds: 600 });
    const cancelledCall = await h.temporal.workflow.start(contractWorkflowType('trash'), {
      taskQueue: h.taskQueue,
      workflowId: 'rec-contract-cancelled',
      args: [{ table: 'reccontract.leased', drainTimeoutSeconds: 120 }],
    });
    await waitFor(
      () => h.catalog.getTable(drained.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the drop to wait for the lease' },
    );
    await cancelledCall.cancel();
    await save('contract-cancelled', 'rec-contract-cancelled');
    await h.client.releaseLease(contractLease.id);
  } finally {
    await h.close();
    await server.stop();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
