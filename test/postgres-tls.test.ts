import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PostgresCatalog } from '../catalog/postgres';
import { makePki, type Pki } from './support/tls-proxy';
import { startPostgres, withClient, type TestPostgres } from './support/postgres';
import { failureOf } from './support/wait';

/*
 * The catalog over TLS to a real PostgreSQL with `ssl=on`: the URL's libpq parameters (sslmode, sslrootcert)
 * are what turns it on and says which CA to trust; a server whose certificate that CA did not sign is refused,
 * and the refusal never shows the URL's password.
 */

let dir: string;
let pki: Pki;
let pg: TestPostgres;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-pg-tls-'));
  pki = makePki(dir);
  pg = await startPostgres({ tls: { cert: pki.serverCert, key: pki.serverKey } });
});
afterAll(async () => {
  await pg?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The database's URL with a password (trust ignores it: it is there to be kept out of messages) and `params`. */
const urlWith = (database: string, params: string) =>
  `${database.replace('postgres://postgres@', 'postgres://postgres:s3cret-pw@')}?${params}`;

test('with sslmode=verify-full and the CA that signed the server, the catalog connects over TLS', async () => {
  const url = urlWith(await pg.freshDatabase('tls'), `sslmode=verify-full&sslrootcert=${pki.ca}`);
  const catalog = await PostgresCatalog.open(url);
  try {
    expect(catalog.id).toMatch(/^[0-9a-f]{8}$/);
  } finally {
    await catalog.close();
  }
  const ssl = await withClient(
    url,
    async (client) => (await client.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).rows[0]?.ssl,
  );
  expect(ssl).toBe(true);
});

test('a server whose certificate another CA signed is refused, and the error does not show the password', async () => {
  const theirs = path.join(dir, 'theirs');
  fs.mkdirSync(theirs);
  const other = makePki(theirs);
  const url = urlWith(await pg.freshDatabase('tls'), `sslmode=verify-full&sslrootcert=${other.ca}`);
  const err = await failureOf(PostgresCatalog.open(url));
  expect(err).toBeInstanceOf(Error);
  expect((err as Error).message).toMatch(/certificate/i);
  expect((err as Error).message).not.toContain('s3cret-pw');
});
