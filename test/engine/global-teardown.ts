import fs from 'node:fs';
import path from 'node:path';
import { ENGINE_BUNDLE_ENV } from './global-setup';

/** Removes the engine's workflow bundle that ./global-setup.ts wrote for the run. */
export default async function globalTeardown(): Promise<void> {
  const file = process.env[ENGINE_BUNDLE_ENV];
  if (file) await fs.promises.rm(path.dirname(file), { recursive: true, force: true });
}
