import fs from 'node:fs';
import { GLOBAL_KEY, globalTestServer } from './global-setup';

/** Stops the global test server (or cluster) and PostgreSQL, and removes their files and the workflow bundle. */
export default async function globalTeardown(): Promise<void> {
  const started = globalTestServer();
  if (!started) return;
  delete (globalThis as Record<string, unknown>)[GLOBAL_KEY];
  try {
    await started.stop();
  } finally {
    await fs.promises.rm(started.tempDir, { recursive: true, force: true });
  }
}
