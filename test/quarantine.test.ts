import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { CliProcess, jsonOf, runCli, type CliExit, type CliResult } from './support/cli';
import { testServerAddress } from './support/test-server';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import type { TableInfo } from '../domain/table';

/*
 * A fatal storage error, met by a real `tablefate worker` process on a real disk fault, ends that process with
 * exit code 70 and quarantines the storage node on disk; every worker then keeps off the node until an
 * operator runs `tablefate quarantine clear <node>`. Everything runs as a person runs it: child processes.
 *
 * The disk fault is the kernel's, not an injection: the node's live directory is made append-only
 * (chattr +a), so files can be renamed into it but not out of it, nor replaced. A create whose shard set
 * finds one file of it already there (what a crashed create leaves) renames its first file in, fails to
 * replace the second (EPERM), and fails to roll the first back (EPERM): a set neither renamed nor put back.
 * chattr needs Linux, a file system with attributes and CAP_LINUX_IMMUTABLE (root); without them that test
 * fails, saying so.
 *
 * Workers run in a Temporal namespace of this file's own, so that its `tablefate` task queue is not the one
 * test/cli.test.ts's workers poll.
 */

const NAMESPACE = 'tablefate-quarantine-test';

/** Whether `chattr +a` works on a directory under the temp dir (Linux, ext4-like file system, root). */
function appendOnlyDirectoriesWork(): boolean {
  if (process.platform !== 'linux') return false;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-chattr-'));
  try {
    execFileSync('chattr', ['+a', dir], { stdio: 'ignore' });
    execFileSync('chattr', ['-a', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection;
const processes: CliProcess[] = [];
const appendOnly: string[] = [];

beforeAll(async () => {
  home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-quarantine-'));
  connection = await Connection.connect({ address: testServerAddress() });
  env = {
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_ADDRESS: testServerAddress(),
    TEMPORAL_NAMESPACE: NAMESPACE,
    TABLEFATE_STORAGE_NODES: '2',
    TABLEFATE_LOG_LEVEL: 'warn',
    // No reconcile schedule left behind on the shared server.
    TABLEFATE_RECONCILE_SECONDS: '0',
  };
});

afterAll(async () => {
  try {
    for (const child of processes) if (!child.exitStatus) await child.stop('SIGKILL', 10_000).catch(() => undefined);
    // Never leave an append-only directory behind: nobody could delete it.
    for (const dir of appendOnly) execFileSync('chattr', ['-a', dir], { stdio: 'ignore' });
  } finally {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

const cli = (...args: string[]) => runCli(args, { env });

function start(...args: string[]): CliProcess {
  const child = CliProcess.start(args, env);
  processes.push(child);
  return child;
}

/** Starts `tablefate worker` and waits until the server sees this very process polling. */
async function startWorker(): Promise<CliProcess> {
  const worker = await startCliWorker(connection, env);
  processes.push(worker);
  return worker;
}

async function exitOf(child: CliProcess, timeoutMs: number): Promise<CliExit> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`process ${child.pid} still running after ${timeoutMs} ms; stderr: ${child.stderr}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([child.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function expectOk(r: CliResult) {
  expect({ args: r.args, code: r.code, stderr: r.stderr }).toEqual({ args: r.args, code: 0, stderr: '' });
}

test('`tablefate quarantine` lists none on healthy storage; `clear` exits 2 on an unknown node and 3 on a node not quarantined', async () => {
  const listed = await cli('quarantine');
  expectOk(listed);
  expect(listed.stdout).toBe('no storage node is quarantined\n');
  expect(jsonOf<unknown[]>(await cli('quarantine', '--json'))).toEqual([]);

  const unknown = await cli('quarantine', 'clear', 'node-7');
  expect({ code: unknown.code, stdout: unknown.stdout, stderr: unknown.stderrLines }).toEqual({
    code: 2,
    stdout: '',
    stderr: ['tablefate: InvalidInput: unknown storage node "node-7"; nodes are node-0, node-1'],
  });
  const healthy = await cli('quarantine', 'clear', 'node-1', '--json');
  expect({ code: healthy.code, stdout: healthy.stdout, stderr: healthy.stderrLines }).toEqual({
    code: 3,
    stdout: '',
    stderr: [JSON.stringify({ error: 'NotQuarantined', message: 'node-1 is not quarantined' })],
  });
  const usage = await cli('quarantine', 'frobnicate');
  expect({ code: usage.code, stderr: usage.stderrLines }).toEqual({
    code: 2,
    stderr: [expect.stringMatching(/^tablefate: Usage: quarantine: expected nothing, `list` or `clear <node>`/) as unknown],
  });
});

test('a fatal error ends `tablefate worker` with exit 70 and quarantines the node; other workers keep off it until `tablefate quarantine clear`', async () => {
  // A real kernel fault needs chattr (Linux, root, an ext4-like temp dir): where it is missing, say so by failing.
  expect(appendOnlyDirectoriesWork()).toBe(true);
  await ensureNamespace(connection, NAMESPACE);
  const first = await startWorker();

  // Which node the next table's only shard lands on: ids come from one counter, shards go to node (id % 2).
  const probe = jsonOf<TableInfo>(await cli('create', 'quarantine.probe', '--shards', '1', '--json'));
  const id = probe.id + 1;
  const node = `node-${id % 2}`;
  const other = `node-${(id + 1) % 2}`;
  const storage = path.join(home, 'storage');
  const live = path.join(storage, node, 'live');

  // The disk turns against the node: one file of the coming shard is already there (as a crashed create
  // leaves it), and the directory becomes append-only.
  await fs.promises.mkdir(live, { recursive: true });
  await fs.promises.writeFile(path.join(live, `t${id}-s0.idx`), '');
  execFileSync('chattr', ['+a', live]);
  appendOnly.push(live);

  const create = start('create', 'quarantine.victim', '--shards', '1', '--json');
  expect(await exitOf(first, 60_000)).toEqual({ code: 70, signal: null });
  expect(first.stderr).toContain('FatalStorageError');
  expect(first.stderr).toContain(`tablefate quarantine clear ${node}`);

  // The marker: on disk, in the node's directory, naming the error, the time, the process and the host.
  const marker = JSON.parse(await fs.promises.readFile(path.join(storage, node, 'QUARANTINED'), 'utf8')) as Record<string, unknown>;
  expect(marker).toEqual({
    node,
    reason: expect.stringMatching(
      new RegExp(`^FatalStorageError in createShard of shard t${id}-s0 on ${node}: rename set left half renamed`),
    ) as unknown,
    since: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/) as unknown,
    pid: first.pid,
    host: os.hostname(),
  });
  // The set is as the fault left it: the first file renamed in, the rest not.
  expect(fs.readdirSync(live).sort()).toEqual([`t${id}-s0.dat`, `t${id}-s0.idx`]);

  // The disk is repaired, but nobody has cleared the node: a new worker still keeps off it, so the create
  // (its activity retried there) ends with a StorageFault instead of touching the node.
  execFileSync('chattr', ['-a', live]);
  appendOnly.pop();
  const second = await startWorker();
  const refused = await exitOf(create, 60_000);
  expect(refused.code).not.toBe(0);
  expect(create.stderr).toContain('StorageFault');
  expect(create.stderr).toContain(`${node} is quarantined since ${String(marker.since)}`);
  expect(create.stderr).toContain(`then run \`tablefate quarantine clear ${node}\``);
  expect(second.stderr).toContain(`${node} is quarantined`);
  expect(fs.readdirSync(live).sort()).toEqual([`t${id}-s0.dat`, `t${id}-s0.idx`]);

  // The other node works as before (the next id lands there); a new operation with a shard on the
  // quarantined node is refused as well.
  const elsewhere = jsonOf<TableInfo>(await cli('create', 'quarantine.elsewhere', '--shards', '1', '--json'));
  expect({ state: elsewhere.state, node: elsewhere.placement[0]!.node }).toEqual({ state: 'READY', node: other });
  const spread = await cli('create', 'quarantine.spread', '--shards', '2');
  expect(spread.code).not.toBe(0);
  expect(spread.stderr).toContain(`${node} is quarantined since`);

  // What the operator sees.
  const listed = await cli('quarantine');
  expectOk(listed);
  const [header, row, ...more] = listed.stdout.trimEnd().split('\n');
  expect(header).toMatch(/^NODE +SINCE +PID +HOST +REASON$/);
  expect(row).toMatch(
    new RegExp(`^${node} +${String(marker.since)} +${first.pid} +${os.hostname()} +FatalStorageError in createShard of shard t${id}-s0`),
  );
  expect(more).toEqual([]);
  expect(jsonOf<unknown[]>(await cli('quarantine', '--json'))).toEqual([marker]);
  const notThisOne = await cli('quarantine', 'clear', other);
  expect(notThisOne.code).toBe(3);

  // Cleared: the node is used again, and the operations refused on it run to the end.
  const cleared = await cli('quarantine', 'clear', node);
  expectOk(cleared);
  expect(cleared.stdout).toBe(`${node}: quarantine cleared (quarantined since ${String(marker.since)}: ${String(marker.reason)})\n`);
  expect(fs.existsSync(path.join(storage, node, 'QUARANTINED'))).toBe(false);
  expect(jsonOf<unknown[]>(await cli('quarantine', '--json'))).toEqual([]);

  const victim = jsonOf<TableInfo>(await cli('create', 'quarantine.victim', '--shards', '1', '--json'));
  expect({ id: victim.id, state: victim.state, node: victim.placement[0]!.node }).toEqual({ id, state: 'READY', node });
  const spreadAgain = jsonOf<TableInfo>(await cli('create', 'quarantine.spread', '--shards', '2', '--json'));
  expect(spreadAgain.state).toBe('READY');
  expect(
    fs
      .readdirSync(live)
      .filter((f) => f.startsWith(`t${id}-`))
      .sort(),
  ).toEqual([`t${id}-s0.dat`, `t${id}-s0.idx`, `t${id}-s0.meta`]);

  expect(await second.stop('SIGINT')).toEqual({ code: 0, signal: null });
});
