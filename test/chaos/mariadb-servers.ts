import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createConnection, type Connection } from 'mariadb';
import { restartLocalMariadb, startLocalMariadb, type LocalMariadb } from '../../servers/local-mariadb';
import { HOST } from '../../servers/local-host';
import { MARIADB_WORKER_GRANTS } from '../../storage/mariadb-privileges';
import type { Progress } from './server-restarts';

/**
 * The MariaDB servers of a `--driver mariadb` chaos run: one throwaway server per storage node (a node is a server), on
 * which the run makes the worker an account of its own with exactly MARIADB_WORKER_GRANTS (least privilege, as a DBA
 * would), distinct from `root`, which the run's user (the row writer, the user's tables, the checker) and the connection
 * cutter use. A server can be crashed (SIGKILL of mariadbd) and started again on the same data directory and port.
 */

/** The worker's account on every node; its sessions are the ones the connection cutter kills. */
export const WORKER_ACCOUNT = 'tablefate_worker';

/** A storage node's server as the run reaches it: as root (the user, the checker) and as the worker. */
export interface MariadbNode {
  node: string;
  rootUrl: string;
  workerUrl: string;
}

/** One node's server: the process now running on its data directory, replaced at each restart. */
interface Running {
  dir: string;
  port: number;
  pid: number;
  stop: () => Promise<void>;
}

/** How many times a start after a crash is tried (the port may take a moment to be free again). */
const RESTART_ATTEMPTS = 5;

export class ChaosMariadb {
  restarts = 0;
  private next = 0;

  private constructor(
    readonly nodes: readonly MariadbNode[],
    private readonly servers: Running[],
    private readonly log: (line: string) => void,
  ) {}

  /**
   * Starts a server per node, one after the other (each installs its data directory: a core's worth for a second or
   * two), and makes the worker's account on each with the grants on `databases` (the run's namespaces).
   */
  static async start(nodeNames: readonly string[], databases: readonly string[], log: (line: string) => void): Promise<ChaosMariadb> {
    const servers: Running[] = [];
    const nodes: MariadbNode[] = [];
    const password = randomBytes(12).toString('hex');
    try {
      for (const node of nodeNames) {
        const started: LocalMariadb = await startLocalMariadb();
        servers.push({ dir: started.dir, port: started.port, pid: started.pid, stop: () => started.stop() });
        const rootUrl = `mariadb://root@${HOST}:${started.port}/`;
        await withMariadb(rootUrl, async (c) => {
          await c.query(`CREATE USER '${WORKER_ACCOUNT}'@'%' IDENTIFIED BY '${password}'`);
          for (const grant of MARIADB_WORKER_GRANTS({ user: WORKER_ACCOUNT, host: '%', namespaces: databases })) await c.query(grant);
        });
        nodes.push({ node, rootUrl, workerUrl: `mariadb://${WORKER_ACCOUNT}:${password}@${HOST}:${started.port}/` });
      }
    } catch (err) {
      for (const s of servers) await s.stop().catch(() => undefined);
      throw err;
    }
    return new ChaosMariadb(nodes, servers, log);
  }

  /**
   * SIGKILLs the next node's mariadbd (the nodes in turn) and starts it again on the same data directory and port, as a
   * crashed server is brought back: every session on it is lost meanwhile, the worker's and the user's.
   */
  async restartOne(): Promise<string> {
    const k = this.next++ % this.servers.length;
    const server = this.servers[k]!;
    const node = this.nodes[k]!.node;
    const at = Date.now();
    process.kill(server.pid, 'SIGKILL');
    // (Our child: gone once this process has reaped it.)
    while (alive(server.pid)) await sleep(20);
    for (let attempt = 1; ; attempt++) {
      try {
        const started = await restartLocalMariadb(server.dir, server.port);
        this.servers[k] = { ...server, pid: started.pid, stop: () => started.stop() };
        break;
      } catch (err) {
        if (attempt >= RESTART_ATTEMPTS) throw err;
        this.log(`mariadbd of ${node} did not start again (attempt ${attempt}): ${(err as Error).message.split('\n')[0]}`);
        await sleep(1000 * attempt);
      }
    }
    this.restarts++;
    this.log(`mariadbd of ${node} SIGKILLed and started again on its data directory in ${((Date.now() - at) / 1000).toFixed(1)} s`);
    return node;
  }

  async stop(): Promise<void> {
    for (const s of this.servers) await s.stop().catch(() => undefined);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A session of its own on the server `url` names, for `work`; closed after. */
export async function withMariadb<T>(url: string, work: (c: Connection) => Promise<T>): Promise<T> {
  const c = await connectTo(url);
  try {
    return await work(c);
  } finally {
    await c.end().catch(() => c.destroy());
  }
}

/** A session on the server `url` names (`mariadb://user:password@host:port/`), numbers as numbers. */
export function connectTo(url: string): Promise<Connection> {
  const { hostname, port, username, password } = new URL(url);
  return createConnection({
    host: hostname,
    port: Number(port),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    connectTimeout: 5000,
    bigIntAsNumber: true,
    decimalAsNumber: true,
  });
}

/** Crashes and restarts a node's server `count` times, spread over the operations between the dev server's restarts. */
export async function restartMariadbDuringOps(
  servers: ChaosMariadb,
  progress: Progress,
  ops: number,
  count: number,
  signal: AbortSignal,
): Promise<Error | undefined> {
  try {
    for (let i = 1; i <= count && !signal.aborted; i++) {
      await progress.reached(Math.ceil((ops * (i - 0.5)) / count));
      if (!signal.aborted) await servers.restartOne();
    }
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}
