import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { loadClientConfig } from '../config/client';
import { InvalidInputError } from '../domain/errors';
import { CliProcess, runCli } from './support/cli';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import { testServerAddress } from './support/test-server';
import { makePki, startTlsProxy, type Pki } from './support/tls-proxy';

const NAMESPACE = 'tablefate-tls-test';

/*
 * The settings a secured Temporal server needs (Temporal Cloud, an mTLS cluster), read the way the `temporal` CLI
 * names them: certificates and keys from files, the API key from the environment or a file.
 */

let dir: string;
const file = (name: string, content: string) => {
  const p = path.join(dir, name);
  fs.writeFileSync(p, content);
  return p;
};
const security = (env: Record<string, string>) => loadClientConfig({ TABLEFATE_HOME: dir, ...env }).temporalSecurity;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-tls-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

test('with no setting, the connection is plain, with no API key', () => {
  expect(security({})).toEqual({});
});

test('a client certificate, its key, a server CA and a server name make an mTLS connection from the files', () => {
  const got = security({
    TEMPORAL_TLS_CLIENT_CERT_PATH: file('client.pem', 'CERT'),
    TEMPORAL_TLS_CLIENT_KEY_PATH: file('client.key', 'KEY'),
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: file('ca.pem', 'CA'),
    TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
  });
  expect(got).toEqual({
    tls: {
      clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
      serverRootCACertificate: Buffer.from('CA'),
      serverNameOverride: 'temporal.internal',
    },
  });
});

test('an API key (from the environment or a file) implies TLS with the system roots, unless TEMPORAL_TLS=false', () => {
  expect(security({ TEMPORAL_API_KEY: 'k1' })).toEqual({ tls: {}, apiKey: 'k1' });
  expect(security({ TEMPORAL_API_KEY_PATH: file('api.key', 'k2\n') })).toEqual({ tls: {}, apiKey: 'k2' });
  expect(security({ TEMPORAL_API_KEY: 'k3', TEMPORAL_TLS: 'false' })).toEqual({ apiKey: 'k3' });
  expect(security({ TEMPORAL_TLS: 'true' })).toEqual({ tls: {} });
});

test('half a client pair, two API keys, TLS settings with TEMPORAL_TLS=false or an unreadable file are refused, naming the variable', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [
      { TEMPORAL_TLS_CLIENT_CERT_PATH: file('only.pem', 'CERT') },
      /TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH go together/,
    ],
    [{ TEMPORAL_API_KEY: 'a', TEMPORAL_API_KEY_PATH: file('b.key', 'b') }, /TEMPORAL_API_KEY or TEMPORAL_API_KEY_PATH, not both/],
    [{ TEMPORAL_TLS: 'false', TEMPORAL_TLS_SERVER_CA_CERT_PATH: file('ca2.pem', 'CA') }, /TEMPORAL_TLS=false, but TLS settings are given/],
    [
      { TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(dir, 'missing.pem') },
      /TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot read .*missing\.pem \(ENOENT\)/,
    ],
    [{ TEMPORAL_TLS: 'yes' }, /TEMPORAL_TLS/],
  ];
  for (const [env, message] of cases) {
    let error: unknown;
    try {
      security(env);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(message);
  }
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
