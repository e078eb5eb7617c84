import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { statePaths } from './config';

/** The Temporal CLI release tablefate builds and is tested with (its dev server is Temporal Server 1.29). */
export const TEMPORAL_CLI_VERSION = '1.5.1';
/** The Go package that builds the `temporal` binary. */
export const TEMPORAL_CLI_GO_PACKAGE = 'github.com/temporalio/cli/cmd/temporal';
/** The command that installs the CLI, as told to users. */
export const TEMPORAL_CLI_INSTALL_COMMAND = `go install ${TEMPORAL_CLI_GO_PACKAGE}@v${TEMPORAL_CLI_VERSION}`;

const EXE = process.platform === 'win32' ? 'temporal.exe' : 'temporal';
const GO_EXE = process.platform === 'win32' ? 'go.exe' : 'go';
/** Partial builds older than this are left over from an interrupted build and are removed. */
const STALE_BUILD_MS = 6 * 3600 * 1000;

export interface FindTemporalCliOptions {
  /** State directory; the built CLI is cached in its `bin` directory. */
  stateDir: string;
  /** Progress messages (default: stderr). */
  log?: (line: string) => void;
}

function defaultLog(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Why `file` is not a usable executable, or null if it is one. */
async function notExecutable(file: string): Promise<string | null> {
  let stat: fs.Stats;
  try {
    stat = await fs.promises.stat(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'no such file' : `cannot be read (${code ?? String(err)})`;
  }
  if (!stat.isFile()) return 'not a file';
  try {
    await fs.promises.access(file, fs.constants.X_OK);
  } catch {
    return 'not executable';
  }
  return null;
}

/** The first executable `name` in the directories of $PATH, or null. */
async function onPath(name: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.resolve(dir, name);
    if ((await notExecutable(candidate)) === null) return candidate;
  }
  return null;
}

/**
 * Finds the Temporal CLI (which contains the dev server) and returns its absolute path. In order:
 * `$TEMPORAL_CLI_PATH`; the copy cached in `<stateDir>/bin`; `temporal` on PATH; a build with Go into
 * the cache (minutes, once). Throws, saying how to install it, if none of these works.
 */
export async function findTemporalCli(opts: FindTemporalCliOptions): Promise<string> {
  const log = opts.log ?? defaultLog;

  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    const file = path.resolve(fromEnv);
    const problem = await notExecutable(file);
    if (problem) {
      throw new Error(
        `TEMPORAL_CLI_PATH is set to "${fromEnv}", but ${file} is ${problem === 'no such file' ? 'not there' : problem}: ` +
          'point it at the Temporal CLI binary, or unset it to use the cached or PATH copy',
      );
    }
    return file;
  }

  const binDir = path.resolve(statePaths(opts.stateDir).bin);
  const cached = path.join(binDir, EXE);
  if ((await notExecutable(cached)) === null) return cached;

  const fromPath = await onPath(EXE);
  if (fromPath) return fromPath;

  const go = await onPath(GO_EXE);
  if (go) return buildWithGo(go, binDir, cached, log);

  throw new Error(
    `the Temporal CLI (temporal) was not found: not in ${cached}, not on PATH, and Go is not installed to build it. ` +
      `Install it with \`GOBIN=${binDir} ${TEMPORAL_CLI_INSTALL_COMMAND}\` (Go 1.25 or newer), ` +
      'or set TEMPORAL_CLI_PATH to an existing binary, or install it from https://docs.temporal.io/cli',
  );
}

/** Removes partial builds left behind by interrupted runs (never a build that may still be running). */
async function removeStaleBuilds(binDir: string): Promise<void> {
  const entries = await fs.promises.readdir(binDir).catch(() => [] as string[]);
  for (const entry of entries) {
    if (!entry.startsWith('.build-')) continue;
    const dir = path.join(binDir, entry);
    try {
      const stat = await fs.promises.stat(dir);
      if (Date.now() - stat.mtimeMs > STALE_BUILD_MS) await fs.promises.rm(dir, { recursive: true, force: true });
    } catch {
      // Gone already, or not ours to remove.
    }
  }
}

/**
 * `go install`s the CLI into a private directory inside `binDir`, then renames the binary onto `target`.
 * A rename within one directory is atomic, so concurrent or interrupted builds never leave a partial binary
 * at `target`.
 */
async function buildWithGo(go: string, binDir: string, target: string, log: (line: string) => void): Promise<string> {
  await fs.promises.mkdir(binDir, { recursive: true });
  await removeStaleBuilds(binDir);
  const buildDir = await fs.promises.mkdtemp(path.join(binDir, '.build-'));
  const started = Date.now();
  log(`building the Temporal CLI v${TEMPORAL_CLI_VERSION} with Go into ${binDir}; the first build takes a few minutes`);
  const heartbeat = setInterval(() => {
    log(`still building the Temporal CLI (${Math.round((Date.now() - started) / 1000)} s so far)`);
  }, 30_000);
  heartbeat.unref();
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(go, ['install', `${TEMPORAL_CLI_GO_PACKAGE}@v${TEMPORAL_CLI_VERSION}`], {
        env: { ...process.env, GOBIN: buildDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.pipe(process.stderr, { end: false });
      child.stderr.pipe(process.stderr, { end: false });
      child.on('error', (err) => reject(new Error(`could not run ${go}: ${err.message}`)));
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        else
          reject(
            new Error(
              `\`${TEMPORAL_CLI_INSTALL_COMMAND}\` failed (${signal ? `signal ${signal}` : `exit code ${String(code)}`}); ` +
                "see go's output above. Alternatively set TEMPORAL_CLI_PATH to a Temporal CLI binary, " +
                'or install one from https://docs.temporal.io/cli',
            ),
          );
      });
    });
    const built = path.join(buildDir, EXE);
    const problem = await notExecutable(built);
    if (problem) throw new Error(`go install succeeded but ${built} is ${problem}`);
    await fs.promises.rename(built, target);
  } finally {
    clearInterval(heartbeat);
    await fs.promises.rm(buildDir, { recursive: true, force: true });
  }
  log(`built the Temporal CLI into ${target} in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}
