import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/**
 * A real headless browser for the tests that look at what a person sees (the Temporal web UI): Debian's `chromium`,
 * driven by playwright-core. Never a browser build of playwright's own: .ci/run installs Debian's when it is missing.
 */

/** The variable that names the chromium binary, when it is neither /usr/bin/chromium nor `chromium` on PATH. */
export const CHROMIUM_ENV = 'TABLEFATE_CHROMIUM';

function executable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The chromium binary: $TABLEFATE_CHROMIUM, else /usr/bin/chromium, else `command -v chromium`; throws, saying how to get one. */
export function findChromium(env: NodeJS.ProcessEnv = process.env): string {
  const named = env[CHROMIUM_ENV];
  if (named) {
    if (!executable(named)) throw new Error(`${CHROMIUM_ENV} is set to "${named}", which is not an executable file`);
    return named;
  }
  if (executable('/usr/bin/chromium')) return '/usr/bin/chromium';
  try {
    const found = execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
    if (found && executable(found)) return found;
  } catch {
    // not on PATH: said below
  }
  throw new Error(
    `no chromium found (not /usr/bin/chromium, none on PATH, ${CHROMIUM_ENV} unset): the web UI's test needs Debian's ` +
      '(apt-get install --no-install-recommends chromium, as .ci/run does), or set ' +
      `${CHROMIUM_ENV} to a chromium binary`,
  );
}

/** Launches headless chromium (`findChromium()`). Close it with `browser.close()`. */
export function launchChromium(): Promise<Browser> {
  // --no-sandbox: the tests run as root in CI, where chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: findChromium(), headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}
