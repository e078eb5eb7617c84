import { Client, Pool } from 'pg';
import { PostgresTables } from '../../storage/postgres-tables';
import { installGuard } from '../../storage/postgres-guard';
import { sharedPostgres, type TestPostgres } from './postgres';

/**
 * A node's database for a test of the guard, as a DBA sets one up: tablefate's worker as it should run (no superuser,
 * CONNECT and CREATE on the database, its storage sessions' search path pinned), a member of a service role that owns
 * tables tablefate adopts (adopt's condition), and the guard installed by the database's superuser.
 */
export interface GuardedNode {
  server: TestPostgres;
  /** The test server's superuser, on its own database. */
  admin: Client;
  url: string;
  /** The node database's superuser (psql). */
  dba: Client;
  /** The worker's storage sessions, and its tables there. */
  pool: Pool;
  tables: PostgresTables;
  /** Another database of the test server where the worker may create schemas; dropped with the node. */
  database(prefix: string): Promise<string>;
  /** Drops the databases and the roles, and closes every session. */
  stop(): Promise<void>;
}

/** `url` as `role` logs in to it (with `password`, where the test says one). */
export const asRole = (url: string, role: string, password?: string): string =>
  url.replace('postgres://postgres@', `postgres://${role}${password === undefined ? '' : `:${password}`}@`);

export const dbName = (url: string): string => new URL(url).pathname.slice(1);

export async function connect(url: string): Promise<Client> {
  const client = new Client({ connectionString: url });
  await client.connect();
  return client;
}

/** Makes the roles `worker` and `owner` (the worker a member of the owner) and the node's database, guarded. */
export async function startGuardedNode(opts: { worker: string; owner: string; prefix: string; password?: string }): Promise<GuardedNode> {
  const { worker, owner } = opts;
  const server = await sharedPostgres();
  const admin = await connect(server.url);
  const databases: string[] = [];
  const database = async (prefix: string) => {
    const made = await server.freshDatabase(prefix);
    databases.push(dbName(made));
    await admin.query(`GRANT CREATE ON DATABASE ${dbName(made)} TO ${worker}`);
    return made;
  };
  await admin.query(`CREATE ROLE ${worker} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  await admin.query(`CREATE ROLE ${owner} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  await admin.query(`GRANT ${owner} TO ${worker}`);
  const url = await database(opts.prefix);
  const dba = await connect(url);
  const pool = new Pool({ connectionString: asRole(url, worker, opts.password), max: 2, options: '-c search_path=pg_catalog,pg_temp' });
  const tables = new PostgresTables(pool);
  await tables.prepare();
  await installGuard(dba, 'node-0');
  return {
    server,
    admin,
    url,
    dba,
    pool,
    tables,
    database,
    stop: async () => {
      await pool.end();
      await dba.end();
      for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      for (const role of [worker, owner]) await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
      await server.stop();
    },
  };
}
