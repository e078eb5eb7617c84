import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import type { Browser, Locator, Page } from 'playwright-core';
import { CliProcess, jsonOf, PROJECT_ROOT, runCli } from './support/cli';
import { findChromium, launchChromium } from './support/browser';
import { waitFor } from './support/wait';
import { TASK_QUEUE } from '../domain/deployment';
import type { TableInfo } from '../domain/table';
import { findTemporalCli } from '../servers/go-tools';

/*
 * The Temporal web UI as an operator uses it, in a real headless browser (Debian's chromium, driven by
 * playwright-core): `tablefate dev` started the way a person starts it (a dev server with its UI, and the worker), a
 * table created and dropped with a day's retention through the command line, then, in the UI, the workflow list
 * filtered by the table's search attributes, the trash run opened, and on its page the pending expiry timer with
 * its summary and the run's current details. The dev server is this file's own (its own TABLEFATE_HOME and ports),
 * not the shared one, which runs headless.
 */

const HOST = '127.0.0.1';
const NAMESPACE = 'default';
const RETENTION_SECONDS = 86_400;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** Where the screenshots go (kept after the run, for a person to look at). */
const OUTPUT_DIR = path.join(PROJECT_ROOT, 'test-output', 'web-ui');
/** How long the UI may take to show what it is asked for. */
const UI_TIMEOUT_MS = 15_000;

let home: string;
let env: NodeJS.ProcessEnv;
let dev: CliProcess | undefined;
let uiUrl: string;
let browser: Browser | undefined;
let page: Page;
/** The table as `tablefate drop --json` answered. */
let dropped: TableInfo;

/** `n` distinct ports that were free a moment ago (bound on 127.0.0.1 together, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => net.createServer());
  try {
    for (const server of servers) await new Promise<void>((resolve) => server.listen(0, HOST, () => resolve()));
    return servers.map((server) => (server.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

/** The pids of `pid`'s children (Linux /proc); empty where that cannot be read. */
function childPids(pid: number): number[] {
  try {
    return fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((task) => fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/))
      .filter((text) => text !== '')
      .map(Number);
  } catch {
    return [];
  }
}

/** Whether `pid` is still this test's Temporal server: alive, and `server start-dev` on a db under `home`. */
function isOurServer(pid: number): boolean {
  try {
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.includes('start-dev') && args.some((arg) => arg.startsWith(home));
  } catch {
    return false;
  }
}

/**
 * Starts `tablefate dev --port P --ui-port U` on free ports and waits until it says where its UI is and its worker
 * (the same process) polls the task queue. Tries other ports if one was taken meanwhile.
 */
async function startDev(baseEnv: NodeJS.ProcessEnv): Promise<{ env: NodeJS.ProcessEnv; uiUrl: string }> {
  for (let attempt = 1; ; attempt++) {
    const [port, uiPort] = await freePorts(2);
    const devEnv = { ...baseEnv, TEMPORAL_ADDRESS: `${HOST}:${port}` };
    // (afterAll stops it, whatever happens from here on)
    const child = (dev = CliProcess.start(['dev', '--port', String(port), '--ui-port', String(uiPort)], devEnv));
    const announced = await waitFor(
      () => Promise.resolve({ stdout: child.stdout, exit: child.exitStatus }),
      ({ stdout, exit }) => exit !== undefined || stdout.includes('tablefate worker running'),
      { timeoutMs: 90_000, intervalMs: 100, what: 'tablefate dev to start' },
    );
    if (announced.exit) {
      if (attempt < 3 && /already in use/.test(child.stderr)) continue;
      throw new Error(`tablefate dev exited early (${JSON.stringify(announced.exit)}); stdout: ${child.stdout}; stderr: ${child.stderr}`);
    }
    const ui = /^Temporal web UI: (http:\S+)$/m.exec(child.stdout)?.[1];
    expect(ui).toBe(`http://${HOST}:${uiPort}`);

    const connection = await Connection.connect({ address: devEnv.TEMPORAL_ADDRESS });
    try {
      await waitFor(
        async () => {
          if (child.exitStatus) throw new Error(`tablefate dev exited (${JSON.stringify(child.exitStatus)}); stderr: ${child.stderr}`);
          const queue = await connection.workflowService.describeTaskQueue({ namespace: NAMESPACE, taskQueue: { name: TASK_QUEUE } });
          return (queue.pollers ?? []).map((p) => p.identity ?? '');
        },
        (identities) => identities.some((id) => id.startsWith(`${child.pid}@`)),
        { timeoutMs: 90_000, intervalMs: 200, what: `the worker of tablefate dev (${child.pid}) to poll` },
      );
    } finally {
      await connection.close();
    }
    return { env: devEnv, uiUrl: ui! };
  }
}

/** Waits until `locator` is visible, reloading the page now and then: the list shows what the server had at load. */
async function visibleAfterReloads(locator: Locator, timeoutMs = UI_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await locator.first().waitFor({ state: 'visible', timeout: Math.min(5_000, Math.max(deadline - Date.now(), 1)) });
      return;
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await locator.page().reload();
    }
  }
}

async function screenshot(name: string): Promise<string> {
  const file = path.join(OUTPUT_DIR, name);
  await fs.promises.mkdir(OUTPUT_DIR, { recursive: true });
  await fs.promises.rm(file, { force: true });
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Runs a test's look at the UI; if it fails, the page as it was then is kept beside the other screenshots. */
async function keepingPageOnFailure(name: string, look: () => Promise<void>): Promise<void> {
  try {
    await look();
  } catch (err) {
    await screenshot(`failed-${name}.png`).catch(() => undefined);
    throw err;
  }
}

beforeAll(async () => {
  // No chromium is a failure, said before anything starts.
  findChromium();
  // Only this run's screenshots there (a failed run's page, kept, would mislead after a passing one).
  await fs.promises.rm(OUTPUT_DIR, { recursive: true, force: true });
  home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-web-ui-'));
  // The CLI binary the global setup found (or the project's cached one), never a build of this file's own.
  const temporalCli = process.env.TEMPORAL_CLI_PATH ?? (await findTemporalCli({ stateDir: path.join(PROJECT_ROOT, '.tablefate') }));
  const started = await startDev({
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_NAMESPACE: NAMESPACE,
    TEMPORAL_CLI_PATH: temporalCli,
    TABLEFATE_LOG_LEVEL: 'warn',
    // No reconcile schedule: nothing but the commands below runs on this server.
    TABLEFATE_RECONCILE_SECONDS: '0',
  });
  env = started.env;
  uiUrl = started.uiUrl;
  browser = await launchChromium();
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(UI_TIMEOUT_MS);
});

afterAll(async () => {
  // The Temporal server that `dev` started (its child): it must not outlive the test even if `dev` has to be killed.
  const serverPids = dev?.pid !== undefined && !dev.exitStatus ? childPids(dev.pid).filter(isOurServer) : [];
  try {
    await browser?.close();
    if (dev) {
      // SIGINT as Ctrl-C: the worker stops, then the server; SIGKILL (and a failure) if it has not within 30 s.
      const exit = await dev.stop('SIGINT', 30_000);
      expect({ exit, stderr: dev.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: dev.stderr });
    }
  } finally {
    // A `dev` that had to be killed leaves its server behind: end it too (by its pid, and only if it is still ours).
    for (const pid of serverPids.filter(isOurServer)) process.kill(pid, 'SIGKILL');
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

describe('the Temporal web UI of tablefate dev', () => {
  test('a table created and dropped with a day of retention through the command line waits in the trash', async () => {
    const created = jsonOf<TableInfo>(await runCli(['create', 'webui.t1', '--shards', '2', '--json'], { env }));
    expect(created).toMatchObject({ namespace: 'webui', name: 't1', state: 'READY', shards: 2 });

    dropped = jsonOf<TableInfo>(await runCli(['drop', 'webui.t1', '-r', String(RETENTION_SECONDS), '--json'], { env }));
    expect(dropped).toMatchObject({ id: created.id, namespace: 'webui', name: 't1', state: 'TRASHED' });
    expect(dropped.expireAt).toMatch(ISO_8601);
    expect(Date.parse(dropped.expireAt!) - Date.parse(dropped.droppedAt!)).toBe(RETENTION_SECONDS * 1000);
  });

  test("the workflow list filtered by the table's search attributes shows its running trash expiry run, and opens it", () =>
    keepingPageOnFailure('list', async () => {
      const query = `TableNamespace="webui" AND TableName="t1"`;
      await page.goto(`${uiUrl}/namespaces/${NAMESPACE}/workflows?query=${encodeURIComponent(query)}`);
      // The filter as the UI shows it, one chip per attribute.
      await page.getByRole('button', { name: 'TableName = "t1"' }).waitFor();
      await page.getByRole('button', { name: 'TableNamespace = "webui"' }).waitFor();

      const runs = page.getByRole('table', { name: 'Workflows' }).getByRole('row');
      const trashRow = runs.filter({ hasText: 'trashExpiry' });
      const dropRow = runs.filter({ hasText: 'trashTable' });
      await visibleAfterReloads(trashRow);
      // Three runs of this table, and no other: its create and its drop (completed: the drop ends at TRASHED), and its
      // trash's expiry (running, waiting on the expiry).
      await visibleAfterReloads(runs.filter({ hasText: 'createTable' }));
      await visibleAfterReloads(dropRow);
      expect(await runs.filter({ has: page.getByRole('link') }).count()).toBe(3);
      expect(await trashRow.innerText()).toMatch(/Running/);
      expect(await dropRow.innerText()).toMatch(/Completed/);
      expect(await dropRow.getByRole('link', { name: new RegExp(`^drop:${dropped.id}@`) }).count()).toBe(1);
      expect(await runs.filter({ hasText: 'createTable' }).innerText()).toMatch(/Completed/);
      await screenshot('workflows.png');

      await trashRow.getByRole('link', { name: new RegExp(`^trash:${dropped.id}@`) }).click();
      await page.waitForURL(new RegExp(`/namespaces/${NAMESPACE}/workflows/trash%3A${dropped.id}%40[^/]+/[^/]+/history$`));
      await page.getByRole('heading', { level: 1, name: new RegExp(`^trash:${dropped.id}@`) }).waitFor();
    }));

  test("the trash expiry run's page shows its pending expiry timer with its summary and its current details with the expiry", () =>
    keepingPageOnFailure('run', async () => {
      const summary = `purge table ${dropped.id} at ${dropped.expireAt}`;
      // The history's timeline names the timer by its summary.
      await page.getByText(summary).first().waitFor();

      await page.getByRole('tab', { name: 'User Metadata' }).click();
      await page.getByRole('heading', { name: 'Events with Metadata' }).waitFor();
      // Each event with a summary is a line: its kind, its summary, its state. A timer still waiting is "Started".
      const timerLine = page
        .locator('div')
        .filter({ has: page.getByText('Timer', { exact: true }) })
        .filter({ hasText: summary })
        // (the line, not only its kind and summary: with the state, whichever it is)
        .filter({ hasText: /(Started|Fired|Canceled)\s*$/ })
        .last();
      await timerLine.waitFor();
      const timerText = (await timerLine.innerText()).replace(/\s+/g, ' ').trim();
      expect(timerText).toMatch(/^Timer /);
      expect(timerText).toContain(summary);
      expect(timerText).toMatch(/ Started$/);

      // The current details, rendered (as markdown) in a frame of their own under their heading.
      const detailsPanel = page
        .locator('div')
        .filter({ has: page.getByRole('heading', { name: 'Current Details' }) })
        .filter({ hasNot: page.getByRole('heading', { name: 'Events with Metadata' }) })
        .filter({ has: page.locator('iframe') });
      const details = detailsPanel.locator('iframe').contentFrame().locator('body');
      await details.getByText(dropped.expireAt!).waitFor();
      const detailsText = await details.innerText();
      expect(detailsText).toContain(`until ${dropped.expireAt}`);

      const file = await screenshot('trash-run.png');
      const png = await fs.promises.readFile(file);
      expect(png.length).toBeGreaterThan(10_000);
      expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    }));
});
