import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';

/*
 * docs/postgres.md's "Privileges", proven: a worker whose role is no superuser, with CONNECT and CREATE on its node's
 * database and nothing else, runs a table's whole life; a service's role, granted what it needs on the live table,
 * uses it, and reaches nothing of tablefate's own while the table is in the trash. Roles are the cluster's (the test
 * server is shared by every file): each run names its own and drops them at the end.
 */

const suffix = randomBytes(4).toString('hex');
const WORKER = `tablefate_worker_${suffix}`;
const SERVICE = `tablefate_service_${suffix}`;
const BARE = `tablefate_bare_${suffix}`;
const PASSWORD = 'worker-pw-31c9';

let server: TestPostgres;
let admin: Client;
const databases: string[] = [];
/** A url of `url`'s database, as `role`. */
const as = (url: string, role: string) => {
  const u = new URL(url);
  u.username = role;
  u.password = PASSWORD;
  return u.toString();
};
const dbName = (url: string) => new URL(url).pathname.slice(1);

/** A new database of the test server in which only `connect` may connect, and only `create` may create (schemas). */
async function database(opts: { connect: string[]; create: string[] }): Promise<string> {
  const url = await server.freshDatabase('pgpriv');
  databases.push(dbName(url));
  await admin.query(`REVOKE ALL ON DATABASE ${dbName(url)} FROM PUBLIC`);
  await admin.query(`GRANT CONNECT ON DATABASE ${dbName(url)} TO ${opts.connect.join(', ')}`);
  if (opts.create.length > 0) await admin.query(`GRANT CREATE ON DATABASE ${dbName(url)} TO ${opts.create.join(', ')}`);
  return url;
}

async function connect(url: string, applicationName?: string): Promise<Client> {
  const client = new Client({ connectionString: url, application_name: applicationName });
  await client.connect();
  return client;
}

beforeAll(async () => {
  server = await sharedPostgres();
  admin = await connect(server.url);
  for (const role of [WORKER, SERVICE, BARE]) {
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS`);
  }
});

afterAll(async () => {
  for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  for (const role of [WORKER, SERVICE, BARE]) await admin.query(`DROP ROLE IF EXISTS ${role}`);
  await admin.end();
  await server?.stop();
});

describe('a worker whose role has only CONNECT and CREATE on the database', () => {
  let url: string;
  let h: Harness;
  /** The table owner's own client (the worker's role): it grants, as no superuser is needed for that either. */
  let owner: Client;
  /** A service's client, as its own role. */
  let service: Client;
  /** The server's superuser on the node's database: it only looks. */
  let dba: Client;

  beforeAll(async () => {
    url = await database({ connect: [WORKER, SERVICE], create: [WORKER] });
    h = await Harness.start({ postgresNodes: [as(url, WORKER)] });
    owner = await connect(as(url, WORKER));
    service = await connect(as(url, SERVICE), 'orders-service');
    dba = await connect(url);
  });

  afterAll(async () => {
    await h?.close();
    for (const client of [owner, service, dba]) await client?.end();
  });

  const trashed = async () =>
    (
      await dba.query<{ relname: string }>(
        "SELECT relname FROM pg_class WHERE relnamespace = 'tablefate_trash'::regnamespace AND relkind = 'r'",
      )
    ).rows;
  const aclOf = async (qualified: string) =>
    (await dba.query<{ acl: string[] }>('SELECT relacl::text[] AS acl FROM pg_class WHERE oid = $1::regclass', [qualified])).rows[0]?.acl;

  it('is no superuser and has no role attribute beyond LOGIN', async () => {
    const { rows } = await dba.query(
      'SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls, rolreplication FROM pg_roles WHERE rolname = $1',
      [WORKER],
    );
    expect(rows).toEqual([{ rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolbypassrls: false, rolreplication: false }]);
    expect((await dba.query('SELECT count(*)::int AS n FROM pg_auth_members WHERE member = $1::regrole', [WORKER])).rows).toEqual([
      { n: 0 },
    ]);
  });

  it('creates, drops, recalls and purges a table a service fills, and the service reaches nothing of it in the trash', async () => {
    const table = await h.client.create({ table: 'shop.orders', columns: 'id int primary key, total numeric(12,2) not null' });
    expect(table.state).toBe('READY');
    // The worker's role made its schemas and owns the table.
    expect(
      (
        await dba.query(
          "SELECT nspname, pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname IN ('shop', 'tablefate', 'tablefate_trash', 'tablefate_garbage') ORDER BY 1",
        )
      ).rows,
    ).toEqual(['shop', 'tablefate', 'tablefate_garbage', 'tablefate_trash'].map((nspname) => ({ nspname, owner: WORKER })));
    expect((await dba.query("SELECT tableowner FROM pg_tables WHERE schemaname = 'shop' AND tablename = 'orders'")).rows).toEqual([
      { tableowner: WORKER },
    ]);

    // The service's role, granted what it needs by the table's owner: the schema, and reading and adding rows.
    await owner.query(`GRANT USAGE ON SCHEMA shop TO ${SERVICE}`);
    await owner.query(`GRANT SELECT, INSERT ON shop.orders TO ${SERVICE}`);
    await service.query('INSERT INTO shop.orders VALUES (1, 9.50), (2, 20)');
    expect((await service.query('SELECT id, total FROM shop.orders ORDER BY id')).rows).toEqual([
      { id: 1, total: '9.50' },
      { id: 2, total: '20.00' },
    ]);
    // No more than granted: no update, and a table it does not own is not its to drop.
    await expect(service.query('UPDATE shop.orders SET total = 0')).rejects.toThrow('permission denied for table orders');
    await expect(service.query('DROP TABLE shop.orders')).rejects.toThrow('must be owner of table orders');
    const grants = await aclOf('shop.orders');
    expect(grants).toContain(`${SERVICE}=ar/${WORKER}`);
    // A statement the service prepared while the table was live.
    const counted = { name: 'count-orders', text: 'SELECT count(*)::int AS n FROM shop.orders' };
    expect((await service.query(counted)).rows).toEqual([{ n: 2 }]);

    expect((await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 })).state).toBe('TRASHED');
    await expect(service.query('SELECT * FROM shop.orders')).rejects.toThrow('relation "shop.orders" does not exist');
    await expect(service.query(counted)).rejects.toThrow('relation "shop.orders" does not exist');
    const [parked] = await trashed();
    expect(parked).toBeDefined();
    // The grant went into the trash with the table; tablefate's schemas are what keep the service out.
    expect(await aclOf(`tablefate_trash."${parked!.relname}"`)).toEqual(grants);
    await expect(service.query(`SELECT * FROM tablefate_trash."${parked!.relname}"`)).rejects.toThrow(
      'permission denied for schema tablefate_trash',
    );
    await expect(service.query(`INSERT INTO tablefate_trash."${parked!.relname}" VALUES (3, 1)`)).rejects.toThrow(
      'permission denied for schema tablefate_trash',
    );
    await expect(service.query('SELECT * FROM tablefate.shards')).rejects.toThrow('permission denied for schema tablefate');

    // Recalled to its name: the service's grants are back with it, and no more than they were.
    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    expect(await aclOf('shop.orders')).toEqual(grants);
    await service.query('INSERT INTO shop.orders VALUES (3, 1)');
    expect((await service.query(counted)).rows).toEqual([{ n: 3 }]);
    await expect(service.query('UPDATE shop.orders SET total = 0')).rejects.toThrow('permission denied for table orders');

    // Recalled into a namespace the worker makes for it: the table's grants come along, its new schema's USAGE does not.
    await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 });
    expect((await h.client.undelete({ table: table.id, newName: 'archive.orders' })).state).toBe('READY');
    expect(await aclOf('archive.orders')).toEqual(grants);
    await expect(service.query('SELECT count(*) FROM archive.orders')).rejects.toThrow('permission denied for schema archive');
    await owner.query(`GRANT USAGE ON SCHEMA archive TO ${SERVICE}`);
    expect((await service.query('SELECT count(*)::int AS n FROM archive.orders')).rows).toEqual([{ n: 3 }]);

    // Purged: nothing of it is left in any schema, nor in tablefate's record.
    await h.client.trash({ table: 'archive.orders', retentionSeconds: 3600 });
    expect((await h.client.purge({ tableId: table.id })).state).toBe('PURGED');
    const left = await dba.query(
      "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('shop', 'archive', 'tablefate_trash', 'tablefate_garbage')",
    );
    expect(left.rows).toEqual([]);
    expect((await dba.query('SELECT count(*)::int AS n FROM tablefate.shards')).rows).toEqual([{ n: 0 }]);
    expect(await h.catalog.listLocks()).toEqual([]);
  });

  it('names who holds a table it cannot drain, but says since when only with pg_read_all_stats', async () => {
    const table = await h.client.create({ table: 'shop.queue', columns: 'id int' });
    await owner.query(`GRANT SELECT ON shop.queue TO ${SERVICE}`);
    const holder = await connect(as(url, SERVICE), 'long-report');
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM shop.queue');
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const held = `pid ${pid} (user ${SERVICE}, application "long-report", since`;
      // Another role's sessions show the worker's role no xact_start in pg_stat_activity.
      await expect(h.client.trash({ table: 'shop.queue', retentionSeconds: 3600, drainTimeoutSeconds: 1 })).rejects.toMatchObject({
        type: 'TableBusy',
        message: expect.stringContaining(`${held} ?)`) as unknown,
      });
      await admin.query(`GRANT pg_read_all_stats TO ${WORKER}`);
      try {
        await expect(h.client.trash({ table: 'shop.queue', retentionSeconds: 3600, drainTimeoutSeconds: 1 })).rejects.toMatchObject({
          type: 'TableBusy',
          message: expect.stringMatching(new RegExp(`${held.replace(/[()]/g, '\\$&')} \\d{4}-\\d\\d-\\d\\dT`)) as unknown,
        });
      } finally {
        await admin.query(`REVOKE pg_read_all_stats FROM ${WORKER}`);
      }
    } finally {
      await holder.end();
    }
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
    expect((await h.client.trash({ table: 'shop.queue', retentionSeconds: 3600 })).state).toBe('TRASHED');
  });

  it('refuses to move a table whose owner someone changed: the drop fails at once, permanently, and is taken back', async () => {
    const table = await h.client.create({ table: 'shop.given', columns: 'id int' });
    await dba.query(`ALTER TABLE shop.given OWNER TO ${SERVICE}`);
    const started = Date.now();
    await expect(h.client.trash({ table: 'shop.given', retentionSeconds: 3600 })).rejects.toMatchObject({
      type: 'StorageFault',
      message: expect.stringContaining('permission denied for table given (SQLSTATE 42501)') as unknown,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
    expect(await h.catalog.listLocks()).toEqual([]);
    expect((await dba.query("SELECT to_regclass('shop.given') IS NOT NULL AS there")).rows).toEqual([{ there: true }]);
  });
});

it('refuses a create, permanently, on a database where the worker may not create, and with schemas made for it then serves', async () => {
  const url = await database({ connect: [BARE], create: [] });
  const h = await Harness.start({ postgresNodes: [as(url, BARE)] });
  try {
    const started = Date.now();
    await expect(h.client.create({ table: 'shop.orders', columns: 'id int' })).rejects.toMatchObject({
      type: 'StorageFault',
      message: expect.stringContaining(`permission denied for database ${dbName(url)}`) as unknown,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    const failed = await h.catalog.findByName({ namespace: 'shop', name: 'orders' });
    expect(failed?.state).toBe('CREATE_FAILED');
    expect(await h.catalog.listLocks()).toEqual([]);
    // The password in the url is never in what the SDK says.
    await expect(h.client.create({ table: 'shop.orders', columns: 'id int' })).rejects.not.toThrow(PASSWORD);

    // The DBA makes tablefate's own schemas for the worker's role, and lets it create in the namespace's, which it keeps.
    await withClient(url, async (dba) => {
      for (const schema of ['tablefate', 'tablefate_trash', 'tablefate_garbage', 'tablefate_sql'])
        await dba.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${BARE}`);
      await dba.query(`CREATE SCHEMA shop; GRANT USAGE, CREATE ON SCHEMA shop TO ${BARE}`);
    });
    const table = await h.client.create({ table: 'shop.orders', columns: 'id int' });
    expect(table).toMatchObject({ id: failed!.id, state: 'READY' });
    await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 });
    expect(await h.shardAreas(table)).toEqual(['trash']);
    await h.client.undelete({ table: table.id });
    expect(await h.shardAreas(table)).toEqual(['live']);
    // A create into a namespace with no schema yet needs CREATE on the database: refused.
    await expect(h.client.create({ table: 'other.orders', columns: 'id int' })).rejects.toMatchObject({
      type: 'StorageFault',
      message: expect.stringContaining('permission denied for database') as unknown,
    });
    expect(await h.catalog.findByName({ namespace: 'other', name: 'orders' })).toMatchObject({ state: 'CREATE_FAILED' });
    // A recall into a namespace with no schema yet is refused too, and the table stays in the trash.
    await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 });
    await expect(h.client.undelete({ table: table.id, newName: 'archive.orders' })).rejects.toMatchObject({
      type: 'StorageFault',
      message: expect.stringContaining('permission denied for database') as unknown,
    });
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
    expect(await h.shardAreas(table)).toEqual(['trash']);
    expect((await h.client.purge({ tableId: table.id })).state).toBe('PURGED');
    expect(await h.shardAreas(table)).toEqual([null]);
  } finally {
    await h.close();
  }
});
