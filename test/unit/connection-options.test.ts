import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadClientConfig } from '../../config/client';
import { InvalidInputError } from '../../domain/errors';

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
