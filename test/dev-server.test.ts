import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { NEXUS_ENDPOINT } from '../domain/contract';
import { TASK_QUEUE } from '../domain/deployment';
import { DevServer, taskQueuePartitions } from '../servers/dev-server';
import { indexedValueType } from '../servers/search-attributes';
import { ensureNexusEndpoint } from '../servers/nexus-endpoint';
import { findGoTool, findServerSchemas, findTemporalCli, TEMPORAL_SERVER, TEMPORAL_SQL_TOOL } from '../servers/go-tools';
import { testNamespace, testServerAddress } from './support/test-server';

/** Runs `fn` with TEMPORAL_CLI_PATH set to `value` (or unset), then puts it back. */
async function withCliPathEnv<T>(value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const saved = process.env.TEMPORAL_CLI_PATH;
  if (value === undefined) delete process.env.TEMPORAL_CLI_PATH;
  else process.env.TEMPORAL_CLI_PATH = value;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.TEMPORAL_CLI_PATH;
    else process.env.TEMPORAL_CLI_PATH = saved;
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

async function customSearchAttributes(address: string, namespace = 'default'): Promise<Record<string, number>> {
  const connection = await Connection.connect({ address });
  try {
    const listed = await connection.operatorService.listSearchAttributes({ namespace });
    return { ...(listed.customAttributes ?? {}) };
  } finally {
    await connection.close();
  }
}

function expectAllSearchAttributes(attributes: Record<string, number>): void {
  for (const key of Object.values(SEARCH_ATTRIBUTES)) {
    expect({ name: key.name, type: attributes[key.name] }).toEqual({ name: key.name, type: indexedValueType(key.type) });
  }
}

let tempDir: string;
const servers: DevServer[] = [];

beforeAll(async () => {
  tempDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-dev-server-test-'));
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await fs.promises.rm(tempDir, { recursive: true, force: true });
});

async function start(opts: Partial<Parameters<typeof DevServer.start>[0]> = {}): Promise<DevServer> {
  const server = await DevServer.start({ stateDir: tempDir, headless: true, log: () => undefined, ...opts });
  servers.push(server);
  return server;
}

describe('findTemporalCli', () => {
  test('TEMPORAL_CLI_PATH naming a missing file is a clear error', async () => {
    const missing = path.join(tempDir, 'no-such-temporal');
    await withCliPathEnv(missing, async () => {
      await expect(findTemporalCli({ stateDir: tempDir })).rejects.toThrow(
        new RegExp(`TEMPORAL_CLI_PATH is set to "${missing}", but .* is not there`),
      );
    });
  });

  test('TEMPORAL_CLI_PATH naming a file that is not executable is a clear error', async () => {
    const plain = path.join(tempDir, 'not-executable');
    await fs.promises.writeFile(plain, 'not a binary', { mode: 0o644 });
    await withCliPathEnv(plain, async () => {
      await expect(findTemporalCli({ stateDir: tempDir })).rejects.toThrow(/TEMPORAL_CLI_PATH .* not executable/);
    });
  });

  test('without TEMPORAL_CLI_PATH, the copy cached in <stateDir>/bin is used', async () => {
    const stateDir = path.join(tempDir, 'cached-state');
    const cached = path.join(stateDir, 'bin', 'temporal');
    await fs.promises.mkdir(path.dirname(cached), { recursive: true });
    await fs.promises.writeFile(cached, '#!/bin/sh\n', { mode: 0o755 });
    await withCliPathEnv(undefined, async () => {
      await expect(findTemporalCli({ stateDir })).resolves.toBe(cached);
    });
  });
});

describe("the server's own binaries, for a cluster", () => {
  test('the Temporal server and its SQL tool are found like the CLI: their own variable, then the cache', async () => {
    const stateDir = path.join(tempDir, 'server-tools');
    const cachedSql = path.join(stateDir, 'bin', 'temporal-sql-tool');
    await fs.promises.mkdir(path.dirname(cachedSql), { recursive: true });
    await fs.promises.writeFile(cachedSql, '#!/bin/sh\n', { mode: 0o755 });
    const server = path.join(tempDir, 'my-temporal-server');
    await fs.promises.writeFile(server, '#!/bin/sh\n', { mode: 0o755 });
    const saved = { server: process.env.TEMPORAL_SERVER_PATH, sql: process.env.TEMPORAL_SQL_TOOL_PATH };
    process.env.TEMPORAL_SERVER_PATH = server;
    delete process.env.TEMPORAL_SQL_TOOL_PATH;
    try {
      await expect(findGoTool(TEMPORAL_SERVER, { stateDir })).resolves.toBe(server);
      await expect(findGoTool(TEMPORAL_SQL_TOOL, { stateDir })).resolves.toBe(cachedSql);
      process.env.TEMPORAL_SERVER_PATH = path.join(tempDir, 'no-such-server');
      await expect(findGoTool(TEMPORAL_SERVER, { stateDir })).rejects.toThrow(/TEMPORAL_SERVER_PATH is set to .* not there/);
    } finally {
      for (const [name, value] of [
        ['TEMPORAL_SERVER_PATH', saved.server],
        ['TEMPORAL_SQL_TOOL_PATH', saved.sql],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  test('without Go and without a copy, the error says how to install the server, of the release the CLI holds, and where its schemas go', async () => {
    const savedPath = process.env.PATH;
    const savedServer = process.env.TEMPORAL_SERVER_PATH;
    process.env.PATH = path.join(tempDir, 'empty-path');
    delete process.env.TEMPORAL_SERVER_PATH;
    try {
      await expect(findGoTool(TEMPORAL_SERVER, { stateDir: path.join(tempDir, 'no-tools') })).rejects.toThrow(
        /the Temporal server was not found: .*Go is not installed.*go install go\.temporal\.io\/server\/cmd\/server@v1\.29\.1.*TEMPORAL_SERVER_PATH/,
      );
      // Nor the schema files, which come from the server's module source: named by their variable instead.
      await expect(findServerSchemas({ stateDir: tempDir })).rejects.toThrow(
        /schema files were not found: Go is not installed .*TEMPORAL_SCHEMA_DIR/,
      );
      process.env.TEMPORAL_SCHEMA_DIR = tempDir;
      await expect(findServerSchemas({ stateDir: tempDir })).rejects.toThrow(
        /holds no temporal\/versioned: not the PostgreSQL \(v12\) schema/,
      );
    } finally {
      delete process.env.TEMPORAL_SCHEMA_DIR;
      process.env.PATH = savedPath;
      if (savedServer === undefined) delete process.env.TEMPORAL_SERVER_PATH;
      else process.env.TEMPORAL_SERVER_PATH = savedServer;
    }
  });
});

describe('DevServer', () => {
  test('the global test server answers at testServerAddress(), with the search attributes registered', async () => {
    expect(testServerAddress()).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(testNamespace()).toBe('default');
    expectAllSearchAttributes(await customSearchAttributes(testServerAddress(), testNamespace()));
  });

  test('ensureNexusEndpoint creates an endpoint, keeps it, corrects its target, and throws at once on a refusal no retry mends', async () => {
    const connection = await Connection.connect({ address: testServerAddress() });
    const name = `ensure-test-${Date.now()}`;
    const target = (taskQueue: string) => ({ name, namespace: 'default', taskQueue });
    const routed = async () => {
      const { endpoints } = await connection.operatorService.listNexusEndpoints({ name, pageSize: 1 });
      return endpoints?.map((e) => e.spec?.target?.worker?.taskQueue);
    };
    try {
      expect(await ensureNexusEndpoint(connection, target('queue-a'), { timeoutMs: 10_000 })).toBe('created');
      expect(await ensureNexusEndpoint(connection, target('queue-a'), { timeoutMs: 10_000 })).toBe('kept');
      expect(await routed()).toEqual(['queue-a']);
      expect(await ensureNexusEndpoint(connection, target('queue-b'), { timeoutMs: 10_000 })).toBe('updated');
      expect(await routed()).toEqual(['queue-b']);
      // Not a name the server takes (InvalidArgument): thrown at once, not tried again for the whole timeout.
      const began = Date.now();
      await expect(ensureNexusEndpoint(connection, { ...target('queue-a'), name: 'not a name!' }, { timeoutMs: 60_000 })).rejects.toThrow(
        /making the Nexus endpoint not a name! failed: .*/,
      );
      expect(Date.now() - began).toBeLessThan(30_000);
    } finally {
      const { endpoints } = await connection.operatorService.listNexusEndpoints({ name, pageSize: 1 });
      for (const e of endpoints ?? []) await connection.operatorService.deleteNexusEndpoint({ id: e.id, version: e.version });
      await connection.close();
    }
  });

  test('starts headless on free ports, registers the search attributes, stops, and restarts on the same db', async () => {
    const dbFile = path.join(tempDir, 'restart', 'temporal.db');
    const first = await start({ dbFile });
    expect(first.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(first.uiUrl).toBeNull();
    expect(first.dbFile).toBe(dbFile);
    expect(fs.existsSync(dbFile)).toBe(true);
    expectAllSearchAttributes(await customSearchAttributes(first.address));
    // A new state runs one partition per task queue, and is marked so for its restarts.
    expect(fs.readFileSync(`${dbFile}.partitions`, 'utf8')).toBe('1\n');
    expect(fs.readFileSync(first.logFile, 'utf8')).toMatch(
      /matching\.numTaskqueueReadPartitions=1 .*matching\.numTaskqueueWritePartitions=1/,
    );

    // A workflow with no worker stays RUNNING; it must survive a restart on the same db.
    const connection = await Connection.connect({ address: first.address });
    const workflowId = `dev-server-test-${Date.now()}`;
    try {
      // The Nexus endpoint of the contract's calls, routed to the worker's queue.
      const { endpoints } = await connection.operatorService.listNexusEndpoints({ name: NEXUS_ENDPOINT, pageSize: 1 });
      expect(endpoints?.map((e) => [e.spec?.name, e.spec?.target?.worker?.namespace, e.spec?.target?.worker?.taskQueue])).toEqual([
        [NEXUS_ENDPOINT, 'default', TASK_QUEUE],
      ]);
      const client = new Client({ connection, namespace: 'default' });
      await client.workflow.start('tablefateNoSuchWorkflow', {
        taskQueue: 'dev-server-test-no-worker',
        workflowId,
        args: [],
        typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.tableOp, value: 'create' }],
      });
    } finally {
      await connection.close();
    }

    await first.stop();
    expect(first.running).toBe(false);
    expect(processExists(first.pid)).toBe(false);
    await first.stop(); // idempotent

    const second = await start({ dbFile });
    expect(second.address).not.toBe(first.address);
    expectAllSearchAttributes(await customSearchAttributes(second.address));
    const again = await Connection.connect({ address: second.address });
    try {
      const client = new Client({ connection: again, namespace: 'default' });
      const description = await client.workflow.getHandle(workflowId).describe();
      expect(description.status.name).toBe('RUNNING');
      expect(description.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableOp)).toBe('create');
    } finally {
      await again.close();
    }
    await second.stop();
    expect(processExists(second.pid)).toBe(false);
  });

  test("a state made before one partition keeps Temporal's four (its tasks in partitions 1 to 3 would never be read with one)", async () => {
    const dir = path.join(tempDir, 'partitions');
    fs.mkdirSync(dir, { recursive: true });
    const old = path.join(dir, 'old.db');
    fs.writeFileSync(old, 'a state from before');
    expect(await taskQueuePartitions(old)).toBe(4);
    expect(fs.existsSync(`${old}.partitions`)).toBe(false);
    const fresh = path.join(dir, 'fresh.db');
    expect(await taskQueuePartitions(fresh)).toBe(1);
    fs.writeFileSync(fresh, 'the server made it');
    expect(await taskQueuePartitions(fresh)).toBe(1);
  });

  test('with a UI, a namespace of its own and the search attributes there', async () => {
    const server = await start({ dbFile: path.join(tempDir, 'ui', 'temporal.db'), headless: false, namespace: 'tablefate-test' });
    expect(server.uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expectAllSearchAttributes(await customSearchAttributes(server.address, 'tablefate-test'));
    await server.stop();
  });

  test('a taken port is refused before starting', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await expect(start({ dbFile: path.join(tempDir, 'taken', 'temporal.db'), port })).rejects.toThrow(
        `gRPC port 127.0.0.1:${port} is already in use`,
      );
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  test('a server that exits at once fails the start with the tail of its log', async () => {
    // A directory where the db file should be: the server cannot open it and exits.
    const dbFile = path.join(tempDir, 'db-is-a-directory');
    await fs.promises.mkdir(dbFile, { recursive: true });
    const logFile = path.join(tempDir, 'failing.log');
    const error = await start({ dbFile, logFile }).then(
      () => new Error('started'),
      (err: unknown) => err as Error,
    );
    expect(error.message).toMatch(/Temporal dev server .* exited with code/);
    expect(error.message).toContain(`Last lines of its log ${logFile}:`);
    expect(error.message).toContain('server start-dev'); // the header line of this run in the log
  });
});
