import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createLogger } from '../../worker/logger';
import { SqlDoor } from '../../worker/sql-door';
import { Harness, type HarnessOptions } from './harness';
import { sharedPostgres, type TestPostgres } from './postgres';
import { waitFor } from './wait';

/** A row as a test reads it. */
export type Row = Record<string, unknown>;

/** The rows a statement answers. */
export const rowsOf = async (client: Client, sql: string, values: unknown[] = []): Promise<Row[]> =>
  (await client.query<Row>(sql, values)).rows;

export const firstOf = async (client: Client, sql: string, values: unknown[] = []): Promise<Row | undefined> =>
  (await rowsOf(client, sql, values))[0];

/** The SQLSTATE and message a statement fails with (or 'ok'). */
export async function failureOf(client: Client, sql: string, values: unknown[] = []): Promise<{ code: string; message: string } | 'ok'> {
  try {
    await client.query(sql, values);
    return 'ok';
  } catch (err) {
    return { code: (err as { code: string }).code, message: (err as Error).message };
  }
}

/** A session that keeps the NOTICEs it hears. */
export type Session = Client & { notices: string[] };

/**
 * A PostgreSQL node with the SQL door, as a DBA sets it up: a fresh database on the suite's server, the role
 * `tablefate_caller` and login roles of the test's own (each name made unique: `roles.alice` is `door_alice_<hex>`),
 * those in `callers` granted the door and CONNECT, CREATE on the database, and a worker (in a Harness) that has made
 * the door on its start.
 */
export class DoorNode {
  private readonly sessions: Client[] = [];

  private constructor(
    readonly server: TestPostgres,
    readonly url: string,
    public admin: Client,
    readonly h: Harness,
    readonly roles: Record<string, string>,
    /** Each node's database, by the node's number. */
    readonly urls: string[],
  ) {}

  static async start(opts: {
    roles: string[];
    callers: string[];
    harness?: Omit<HarnessOptions, 'postgresNodes'>;
    /** A server of the test's own (the suite's shared one by default). */
    server?: TestPostgres;
    /** How many storage nodes, each a database of the server (1 by default): node-0 is `url`. */
    nodes?: number;
  }): Promise<DoorNode> {
    const server = opts.server ?? (await sharedPostgres());
    const urls: string[] = [];
    for (let i = 0; i < (opts.nodes ?? 1); i++) urls.push(await server.freshDatabase('door'));
    const url = urls[0]!;
    const admin = new Client({ connectionString: url });
    admin.on('error', () => undefined);
    await admin.connect();
    const suffix = randomBytes(3).toString('hex');
    const roles = Object.fromEntries(opts.roles.map((role) => [role, `door_${role}_${suffix}`]));
    await admin.query(`DO $$ BEGIN CREATE ROLE tablefate_caller NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
    for (const role of Object.values(roles)) await admin.query(`CREATE ROLE ${role} LOGIN`);
    for (const caller of opts.callers) {
      await admin.query(`GRANT tablefate_caller TO ${roles[caller]}`);
      for (const db of urls.map((u) => new URL(u).pathname.slice(1))) {
        await admin.query(`GRANT CONNECT, CREATE ON DATABASE "${db}" TO ${roles[caller]}`);
      }
    }
    const h = await Harness.start({ ...opts.harness, postgresNodes: urls });
    await waitFor(
      async () =>
        (await firstOf(admin, `SELECT to_regprocedure('tablefate_sql._request(text, text, jsonb, uuid)') IS NOT NULL AS there`))?.there,
      (there) => there === true,
      { what: "the worker's door on the node" },
    );
    return new DoorNode(server, url, admin, h, roles, urls);
  }

  /** The node's url for `role` (one of the test's, by its short name), with `application_name` if given. */
  urlOf(role: string, applicationName?: string, node = 0): string {
    const target = new URL(this.urls[node]!);
    target.username = this.roles[role] ?? role;
    if (applicationName) target.searchParams.set('application_name', applicationName);
    return target.toString();
  }

  /** A session of `role` on node `node` (node-0 by default), as its own client would open it (application `<role>-app`). */
  async sessionOf(role: string, node = 0): Promise<Session> {
    const client = Object.assign(
      new Client({ connectionString: this.urlOf(role, undefined, node), application_name: `${this.roles[role]}-app` }),
      {
        notices: [] as string[],
      },
    );
    client.on('notice', (notice) => void client.notices.push(notice.message ?? ''));
    // (A session the server ends, restarted or terminating it, fails its next query; the event itself is expected.)
    client.on('error', () => undefined);
    await client.connect();
    this.sessions.push(client);
    return client;
  }

  /** Where the relation of `oid` is: its schema's name (undefined: gone). */
  async schemaOf(oid: number): Promise<string | undefined> {
    const row = await firstOf(
      this.admin,
      'SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1',
      [oid],
    );
    return row?.nspname as string | undefined;
  }

  /** A table `owner` makes in schema shop on node `node`, with two rows, that tablefate keeps (adopted): its id and oid. */
  async ownedTable(owner: string, name: string, node = 0): Promise<{ id: number; oid: number }> {
    const session = await this.sessionOf(owner, node);
    await session.query(`CREATE SCHEMA IF NOT EXISTS shop`);
    await session.query(`CREATE TABLE shop.${name} (id int PRIMARY KEY, note text); INSERT INTO shop.${name} VALUES (1, 'a'), (2, 'b')`);
    const table = await this.h.client.adopt({ table: `shop.${name}`, node: `node-${node}` });
    const oid = Number((await firstOf(session, `SELECT 'shop.${name}'::regclass::oid AS oid`))?.oid);
    return { id: table.id, oid };
  }

  /** Resolves once table `id`'s drop waits in DRAINING (for a lease the test holds). */
  async untilDraining(id: number): Promise<void> {
    await waitFor(
      () => this.h.catalog.getTable(id),
      (table) => table?.state === 'DRAINING',
      { what: `the drop of table ${id} to drain` },
    );
  }

  /** The superuser's session made again (after the server restarted). */
  async reconnectAdmin(): Promise<Client> {
    await this.admin.end().catch(() => undefined);
    this.admin = new Client({ connectionString: this.url });
    this.admin.on('error', () => undefined);
    await this.admin.connect();
    return this.admin;
  }

  /** A second worker's door on the node, beside the harness worker's (as two workers serving one node have). */
  async secondDoor(): Promise<SqlDoor> {
    const second = new SqlDoor({
      node: 'node-0',
      url: this.url,
      catalogId: this.h.catalog.id,
      callerFor: () => this.h.client,
      logger: createLogger('silent'),
      tableOf: async (tableId) => (await this.h.catalog.getTable(tableId)) ?? null,
      prepare: () => Promise.resolve(),
    });
    await second.start();
    return second;
  }

  async close(): Promise<void> {
    for (const client of this.sessions) await client.end().catch(() => undefined);
    await this.h.close();
    for (const role of Object.values(this.roles)) {
      await this.admin.query(`DROP OWNED BY ${role}; DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    }
    await this.admin.end();
    await this.server.stop();
  }
}
