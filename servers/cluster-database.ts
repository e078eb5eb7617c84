import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { findGoTool, findServerSchemas, TEMPORAL_SQL_TOOL } from './go-tools';
import { logTail } from './local-host';
import { giveToPostgres, ownDirectoryForPostgres, postgresRunning, runPostgresProgram, serverOptions } from './local-postgres';
import { CLUSTER_CONFIG_DIR } from './cluster-config';
import type { ClusterState } from './cluster-state';

const execFileAsync = promisify(execFile);

/**
 * A cluster's PostgreSQL: the server this host runs for it under the state directory (made once, started when it is
 * not running), or one given; and Temporal's two databases on it, set up by deploy/temporal/setup-schema.sh as
 * compose's schema step sets them up.
 */

const SETUP_SCHEMA_SCRIPT = path.join(CLUSTER_CONFIG_DIR, 'setup-schema.sh');

type ClusterDatabase = ClusterState['database'];

/** The local PostgreSQL server made (once) and started, if the cluster runs its own. */
export async function ensureDatabase(db: ClusterDatabase, log: (line: string) => void): Promise<void> {
  if (!db.local) return;
  const { dataDir, bin } = db.local;
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    log(`initialising a PostgreSQL server for the cluster in ${dataDir}`);
    await ownDirectoryForPostgres(path.dirname(dataDir));
    const passwordFile = path.join(path.dirname(dataDir), 'initdb-password');
    await fs.promises.writeFile(passwordFile, `${db.password}\n`, { mode: 0o600 });
    await giveToPostgres(passwordFile);
    try {
      await runPostgresProgram(bin, 'initdb', [
        '-D',
        dataDir,
        '-U',
        db.user,
        '--pwfile',
        passwordFile,
        '-A',
        'scram-sha-256',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-instructions',
      ]);
    } finally {
      await fs.promises.rm(passwordFile, { force: true });
    }
  }
  if (await postgresRunning(bin, dataDir)) return;
  const logFile = path.join(path.dirname(dataDir), 'server.log');
  log(`starting the cluster's PostgreSQL on ${db.host}:${db.port}`);
  const options = `${serverOptions({ listen_addresses: db.host, max_connections: 300 })} -p ${db.port} -k ${path.dirname(dataDir)}`;
  try {
    await runPostgresProgram(bin, 'pg_ctl', ['-D', dataDir, '-o', options, '-l', logFile, '-w', '-t', '60', 'start']);
  } catch (err) {
    throw new Error(`the cluster's PostgreSQL did not start: ${(err as Error).message}\n${await logTail(logFile, 0)}`);
  }
}

/** Whether the cluster's own PostgreSQL runs (null: the cluster runs none, it was given one). */
export async function databaseRunning(db: ClusterDatabase): Promise<boolean | null> {
  return db.local ? postgresRunning(db.local.bin, db.local.dataDir) : null;
}

/** Stops the cluster's own PostgreSQL, if it runs one and that runs. */
export async function stopDatabase(db: ClusterDatabase, log?: (line: string) => void): Promise<void> {
  if (!db.local || !(await postgresRunning(db.local.bin, db.local.dataDir))) return;
  log?.("stopping the cluster's PostgreSQL");
  await runPostgresProgram(db.local.bin, 'pg_ctl', ['-D', db.local.dataDir, '-m', 'fast', '-w', 'stop']);
}

/** deploy/temporal/setup-schema.sh, as compose's schema step runs it: idempotent, so on every `up`. */
export async function setUpSchemas(db: ClusterDatabase, toolDir: string, log: (line: string) => void): Promise<void> {
  const [sqlTool, schemas] = [
    await findGoTool(TEMPORAL_SQL_TOOL, { stateDir: toolDir, log }),
    await findServerSchemas({ stateDir: toolDir, log }),
  ];
  log(`setting up the schemas of ${db.names.history} and ${db.names.visibility} on ${db.host}:${db.port} (${SETUP_SCHEMA_SCRIPT})`);
  try {
    await execFileAsync('sh', [SETUP_SCHEMA_SCRIPT], {
      env: {
        ...process.env,
        POSTGRES_SEEDS: db.host,
        DB_PORT: String(db.port),
        POSTGRES_USER: db.user,
        SQL_PASSWORD: db.password,
        TEMPORAL_SQL_TOOL: sqlTool,
        TEMPORAL_SCHEMA_DIR: schemas,
        TEMPORAL_DB_NAME: db.names.history,
        TEMPORAL_VISIBILITY_DB_NAME: db.names.visibility,
      },
      maxBuffer: 16 << 20,
    });
  } catch (err) {
    const failed = err as { stdout?: string; stderr?: string; message: string };
    const output = `${failed.stdout ?? ''}${failed.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n');
    throw new Error(`setting up Temporal's schemas failed (${SETUP_SCHEMA_SCRIPT}):\n${output || failed.message}`);
  }
}
