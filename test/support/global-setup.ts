import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DevServer } from '../../worker/dev-server';
import { findTemporalCli } from '../../worker/temporal-cli';

/** What global-teardown.ts needs; kept on globalThis, which jest shares between global setup and teardown. */
export interface GlobalTestServer {
  server: DevServer;
  tempDir: string;
}

export const GLOBAL_KEY = '__tablefateTestServer';

export function globalTestServer(): GlobalTestServer | undefined {
  return (globalThis as Record<string, unknown>)[GLOBAL_KEY] as GlobalTestServer | undefined;
}

/** Starts one headless Temporal dev server, on a fresh db, for the whole test run. */
export default async function globalSetup(): Promise<void> {
  // The project's state dir, so the cached CLI binary (or a build of it) is reused across runs.
  const projectStateDir = path.resolve(__dirname, '../../.tablefate');
  const cli = await findTemporalCli({ stateDir: projectStateDir });
  process.env.TEMPORAL_CLI_PATH = cli;

  const tempDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-test-'));
  const server = await DevServer.start({ stateDir: tempDir, cliPath: cli, headless: true, namespace: 'default' });
  (globalThis as Record<string, unknown>)[GLOBAL_KEY] = { server, tempDir } satisfies GlobalTestServer;

  process.env.TEMPORAL_ADDRESS = server.address;
  process.env.TEMPORAL_NAMESPACE = 'default';
}
