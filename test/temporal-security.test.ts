import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { CliProcess, runCli } from './support/cli';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import { testServerAddress } from './support/test-server';
import { makePki, startTlsProxy, type Pki } from './support/tls-proxy';

const NAMESPACE = 'tablefate-tls-test';

/*
 * The worker and the command line against a secured Temporal server, here a TLS front that requires a client
 * certificate (how the settings are read is tested without a server: test/unit/connection-options.test.ts).
 */

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-tls-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('through a TLS front that requires a client certificate', () => {
  let pki: Pki;
  let proxy: Awaited<ReturnType<typeof startTlsProxy>>;
  let home: string;
  let connection: Connection;
  let worker: CliProcess | undefined;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    pki = makePki(dir);
    proxy = await startTlsProxy(pki, testServerAddress());
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-tls-home-'));
    connection = await Connection.connect({ address: testServerAddress() });
    await ensureNamespace(connection, NAMESPACE);
    env = {
      ...process.env,
      TABLEFATE_HOME: home,
      TEMPORAL_ADDRESS: proxy.address,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TEMPORAL_TLS_CLIENT_CERT_PATH: pki.clientCert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: pki.clientKey,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.ca,
      TABLEFATE_LOG_LEVEL: 'info',
      TABLEFATE_RECONCILE_SECONDS: '0',
    };
  });
  afterAll(async () => {
    if (worker && !worker.exitStatus) await worker.stop('SIGINT');
    await connection?.close();
    await proxy?.stop();
    fs.rmSync(home, { recursive: true, force: true });
  });

  test('the worker and the command line connect with mTLS, and the key is never logged', async () => {
    worker = await startCliWorker(connection, env);
    const created = await runCli(['create', 'tls.orders', '--shards', '2', '--json'], { env });
    expect(created.code).toBe(0);
    const listed = await runCli(['ls', '--json'], { env });
    expect((JSON.parse(listed.stdout) as Array<{ name: string }>).map((t) => t.name)).toEqual(['orders']);
    expect(worker.stderr).toContain('"tls":true');
    expect(worker.stderr).not.toContain(fs.readFileSync(pki.clientKey, 'utf8').split('\n')[1]!);
  });

  test('without the client certificate the server is unreachable: exit 6, nothing started', async () => {
    const plain = { ...env, TEMPORAL_TLS_CLIENT_CERT_PATH: undefined, TEMPORAL_TLS_CLIENT_KEY_PATH: undefined };
    const r = await runCli(['create', 'tls.refused'], { env: plain });
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/ServerUnreachable/);
  });
});
