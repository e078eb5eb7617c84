import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { findGoTool, TEMPORAL_SERVER, TEMPORAL_SQL_TOOL, TEMPORAL_UI_SERVER } from '../../servers/go-tools';
import type { ClusterStatus } from '../../servers/cluster';
import { SEARCH_ATTRIBUTES } from '../../domain/search-attributes';
import { freePort } from '../support/postgres';
import { PROJECT_ROOT, runCli, type CliProcess } from '../support/cli';
import { startCliWorker } from '../support/cli-worker';

/**
 * `tablefate cluster up|status|down` as an operator runs it, on a home of its own with no PostgreSQL given: the
 * command makes and runs one of this host's installation under the home, sets up Temporal's databases, and starts
 * every service as a process of its own, with the web UI. The binaries come from the project's cache (built there by
 * the first run), named by their variables as a user with their own copies would.
 */

let home: string;
let env: NodeJS.ProcessEnv;
let worker: CliProcess | undefined;

beforeAll(async () => {
  const stateDir = path.join(PROJECT_ROOT, '.tablefate');
  const [server, sql, ui] = await Promise.all(
    [TEMPORAL_SERVER, TEMPORAL_SQL_TOOL, TEMPORAL_UI_SERVER].map((tool) => findGoTool(tool, { stateDir, log: () => undefined })),
  );
  home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-cluster-cli-'));
  // As root, PostgreSQL runs as the postgres user, who must reach its directory under the home (mkdtemp's is 0700).
  await fs.promises.chmod(home, 0o755);
  env = {
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_SERVER_PATH: server,
    TEMPORAL_SQL_TOOL_PATH: sql,
    TEMPORAL_UI_SERVER_PATH: ui,
    TABLEFATE_LOG_LEVEL: 'warn',
    TABLEFATE_RECONCILE_SECONDS: '0',
  };
}, 600_000);

afterAll(async () => {
  await worker?.stop('SIGKILL').catch(() => undefined);
  // Whatever a failed test left running.
  await runCli(['cluster', 'down', '--forget'], { env, timeoutMs: 60_000 }).catch(() => undefined);
  await fs.promises.rm(home, { recursive: true, force: true });
});

const cluster = (args: string[], timeoutMs = 180_000) => runCli(['cluster', ...args], { env, timeoutMs });
const status = async () => {
  const result = await cluster(['status', '--json']);
  return { code: result.code, status: JSON.parse(result.stdout) as ClusterStatus };
};
/** Whether process `pid` exists and is not a zombie (one that exited but whose parent has not reaped it yet). */
const alive = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

test('status and down with no cluster say so (exit 3); bad options and an unreachable PostgreSQL are refused, keeping nothing', async () => {
  const none = await cluster(['status']);
  expect(none.code).toBe(3);
  expect(none.stderr).toMatch(/no cluster under .*cluster up/);
  expect((await cluster(['down'])).code).toBe(3);
  const bad = await cluster(['up', '--history', '9', '--json']);
  expect(bad.code).toBe(2);
  const refusal = JSON.parse(bad.stderr) as { error: string; message: string };
  expect(refusal.error).toBe('InvalidInput');
  expect(refusal.message).toMatch(/--history .* 1 to 8/);
  expect((await cluster(['up', '--forget'])).code).toBe(2);
  expect((await cluster(['up', '--postgres', 'not-a-url'])).code).toBe(2);
  expect(fs.existsSync(path.join(home, 'cluster', 'cluster.json'))).toBe(false);

  // A PostgreSQL that is not there: the schema step says so, and nothing is kept (the next up may name another).
  const unreachable = await cluster(['up', '--postgres', 'postgres://temporal:pw@127.0.0.1:1', '--headless']);
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr).toMatch(/setting up Temporal's schemas failed .*setup-schema\.sh/);
  expect(unreachable.stderr).toMatch(/connection refused/);
  expect(fs.existsSync(path.join(home, 'cluster', 'cluster.json'))).toBe(false);
});

test('up makes PostgreSQL, the schemas, every service as its own process and the UI; tablefate runs on it unchanged', async () => {
  const [port, uiPort] = [await freePort(), await freePort()];
  const up = await cluster(['up', '--port', String(port), '--ui-port', String(uiPort), '--history', '2', '--json']);
  expect({ code: up.code, stderr: up.stderr }).toMatchObject({ code: 0 });
  expect(up.stderr).toMatch(/initialising a PostgreSQL server/);
  expect(up.stderr).toMatch(/setting up the schemas of temporal and temporal_visibility/);
  const made = JSON.parse(up.stdout) as ClusterStatus;
  expect(made).toMatchObject({ address: `127.0.0.1:${port}`, namespace: 'default', uiUrl: `http://127.0.0.1:${uiPort}` });
  expect(made.database).toMatchObject({ local: true, running: true, user: 'postgres' });
  expect(made.processes.map((p) => [p.name, p.running, p.listening])).toEqual([
    ['frontend', true, true],
    ['history-1', true, true],
    ['history-2', true, true],
    ['matching', true, true],
    ['worker', true, true],
    ['ui', true, true],
  ]);
  // Separate processes, each a Temporal server of one service.
  const pids = made.processes.map((p) => p.pid!);
  expect(new Set(pids).size).toBe(6);
  for (const p of made.processes.filter((p) => p.name !== 'ui')) {
    const cmdline = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0');
    expect(cmdline).toEqual(expect.arrayContaining(['start', '--service', p.name.replace(/-\d$/, '')]));
  }
  // A new cluster runs one partition per task queue: its own copy of deploy/temporal's dynamic config says so.
  const matching = made.processes.find((p) => p.name === 'matching')!;
  const environ = fs.readFileSync(`/proc/${matching.pid}/environ`, 'utf8').split('\0');
  const dynamicConfig = path.join(home, 'cluster', 'dynamicconfig.yaml');
  expect(environ).toContain(`TEMPORAL_DYNAMIC_CONFIG_FILE=${dynamicConfig}`);
  const config = fs.readFileSync(dynamicConfig, 'utf8');
  expect(config).toMatch(/^limit\.maxIDLength:/m);
  expect(config).toMatch(/^matching\.numTaskqueueReadPartitions:\n {2}- value: 1$/m);
  expect(config).toMatch(/^matching\.numTaskqueueWritePartitions:\n {2}- value: 1$/m);
  // Nexus (the service tablefate, its endpoint made by `up`): callbacks to this cluster's frontend, its HTTP API.
  const frontend = made.processes.find((p) => p.name === 'frontend')!;
  const frontendEnv = fs.readFileSync(`/proc/${frontend.pid}/environ`, 'utf8').split('\0');
  const httpPort = frontendEnv.find((e) => e.startsWith('TEMPORAL_FRONTEND_HTTP_PORT='))!.split('=')[1];
  expect(frontendEnv).toContain(`TEMPORAL_FRONTEND_HTTP_ADDRESS=127.0.0.1:${httpPort}`);
  expect(config).toContain(`http://127.0.0.1:${httpPort}/namespaces/{{.NamespaceName}}/nexus/callback`);
  expect(config).not.toContain('temporal-frontend:7243');

  // The web UI answers, and the namespace has tablefate's search attributes.
  const page = await fetch(made.uiUrl!);
  expect(page.status).toBe(200);
  expect(await page.text()).toMatch(/<html/i);
  // ... and reaches the frontend: its API lists the namespace.
  const namespaces = await fetch(`${made.uiUrl}/api/v1/namespaces`);
  expect(namespaces.status).toBe(200);
  expect(await namespaces.text()).toMatch(/"name":\s*"default"/);
  const connection = await Connection.connect({ address: made.address });
  try {
    const attributes = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    expect(Object.keys(attributes.customAttributes ?? {})).toEqual(
      expect.arrayContaining(Object.values(SEARCH_ATTRIBUTES).map((a) => a.name)),
    );

    // tablefate as it is, pointed at the cluster.
    const onCluster = { ...env, TEMPORAL_ADDRESS: made.address, TEMPORAL_NAMESPACE: 'default' };
    worker = await startCliWorker(connection, onCluster);
    const created = await runCli(['create', 'shop.orders', '--shards', '3', '--json'], { env: onCluster });
    expect(created.code).toBe(0);
    const dropped = await runCli(['drop', 'shop.orders', '--json'], { env: onCluster });
    expect(JSON.parse(dropped.stdout)).toMatchObject({ state: 'TRASHED' });
    const recalled = await runCli(['recall', 'shop.orders', '--json'], { env: onCluster });
    expect(JSON.parse(recalled.stdout)).toMatchObject({ state: 'READY', shards: 3 });
    const ops = await runCli(['ops', '--table', 'shop.orders', '--json'], { env: onCluster });
    expect((JSON.parse(ops.stdout) as Array<{ operation: string }>).map((o) => o.operation)).toEqual(['undelete', 'trash', 'create']);
  } finally {
    await worker?.stop();
    worker = undefined;
    await connection.close();
  }
}, 300_000);

test('a history process SIGKILLed shows as stopped (exit 1), and up again starts it alone, on the same ports', async () => {
  const before = (await status()).status;
  const history1 = before.processes.find((p) => p.name === 'history-1')!;
  process.kill(history1.pid!, 'SIGKILL');
  while (alive(history1.pid!)) await new Promise((resolve) => setTimeout(resolve, 50));

  const broken = await status();
  expect(broken.code).toBe(1);
  expect(broken.status.processes.find((p) => p.name === 'history-1')).toMatchObject({ running: false, pid: null });
  const text = await cluster(['status']);
  expect(text.stdout).toMatch(/history-1\s+-\s+stopped/);

  const again = await cluster(['up']);
  expect({ code: again.code, stderr: again.stderr }).toMatchObject({ code: 0 });
  expect(again.stderr).toMatch(/started history-1;/);
  const healed = await status();
  expect(healed.code).toBe(0);
  for (const p of healed.status.processes) {
    const was = before.processes.find((b) => b.name === p.name)!;
    expect(p.port).toBe(was.port);
    if (p.name !== 'history-1') expect(p.pid).toBe(was.pid);
  }
}, 300_000);

test('down stops every process and its PostgreSQL, up brings the same cluster back, down --forget removes it', async () => {
  const before = (await status()).status;
  const down = await cluster(['down', '--json']);
  expect(down.code).toBe(0);
  expect(JSON.parse(down.stdout)).toMatchObject({ stopped: before.processes.map((p) => p.name), forgotten: false });
  for (const p of before.processes) expect(alive(p.pid!)).toBe(false);
  const stopped = await status();
  expect(stopped.code).toBe(1);
  expect(stopped.status.database.running).toBe(false);
  expect(stopped.status.processes.every((p) => !p.running)).toBe(true);

  const back = await cluster(['up', '--json']);
  expect({ code: back.code, stderr: back.stderr }).toMatchObject({ code: 0 });
  expect(back.stderr).not.toMatch(/initialising/);
  expect(JSON.parse(back.stdout)).toMatchObject({ address: before.address, uiUrl: before.uiUrl });
  // Another frontend port than the cluster's is refused: the cluster is taken as it was made.
  const clash = await cluster(['up', '--port', '1']);
  expect(clash.code).toBe(1);
  expect(clash.stderr).toMatch(/a cluster exists .* frontend port/);

  const forgotten = await cluster(['down', '--forget', '--json']);
  expect(forgotten.code).toBe(0);
  expect(fs.existsSync(path.join(home, 'cluster'))).toBe(false);
  expect((await cluster(['status'])).code).toBe(3);
}, 300_000);
