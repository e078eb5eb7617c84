import { Pool, type PoolClient, type PoolConfig, type QueryResultRow } from 'pg';

/**
 * How tablefate talks to PostgreSQL, for the catalog's store and the PostgreSQL storage driver alike: one way to make a
 * pool, one way to run a transaction.
 */

/** A pool or one of its connections. */
export interface Queryable {
  query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
  /** A statement prepared once per session by its name. */
  query<R extends QueryResultRow>(statement: {
    name: string;
    text: string;
    values: unknown[];
  }): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Quotes an identifier, always: a name is never SQL. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * A string constant, where SQL takes no parameter (a comment, an option's value in DDL), as tablefate's sessions read
 * it: with `standard_conforming_strings` on, which each pins, a backslash is itself and only a quote is doubled.
 */
export const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;

/**
 * A pool whose connections can never end the process. A server that ends a session (a restart, `pg_terminate_backend`)
 * fails the query in flight, and also emits 'error' on the connection; pg-pool listens only while a connection is idle
 * in it, and not in the moment between handing a new one out and its first query. So every connection gets a listener
 * of its own as it is made: the error reaches the caller through its query, and the pool drops the dead connection
 * (it is no longer queryable) when it is given back.
 */
export function newPool(config: PoolConfig): Pool {
  const pool = new Pool(config);
  pool.on('connect', (client) => client.on('error', () => undefined));
  // An idle connection that breaks is dropped by the pool; the next query opens another.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Runs `fn` in a transaction of its own on a connection of `pool`: committed if `fn` resolves, rolled back (and the error
 * thrown) if it does not. A connection that cannot even roll back is closed rather than given back to the pool.
 */
export async function inPgTransaction<T>(pool: Pool, fn: (c: PoolClient) => Promise<T>): Promise<T> {
  const client = await begun(pool);
  let broken: Error | undefined;
  try {
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
    throw err;
  } finally {
    client.release(broken);
  }
}

/** How many connections a transaction tries to begin on before it fails. */
const BEGIN_ATTEMPTS = 3;

/**
 * A connection of `pool` with a transaction begun on it. A connection the server ended while it sat idle in the pool
 * (a restart, `pg_terminate_backend`) can be handed out before the pool has heard: its BEGIN fails, nothing was done on
 * it, so it is closed and another one tried, a few times, rather than fail the caller's first statement.
 */
async function begun(pool: Pool): Promise<PoolClient> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      return client;
    } catch (err) {
      client.release(err instanceof Error ? err : new Error(String(err)));
      if (attempt >= BEGIN_ATTEMPTS) throw err;
    }
  }
}
