import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { statePaths } from '../config/paths';

const execFileAsync = promisify(execFile);

/**
 * A Temporal binary tablefate builds from its Go module when it is not at hand: the CLI (which holds the dev server), and
 * for a cluster the server itself and its SQL schema tool, of the same server release (1.29.1, inside CLI 1.5.1). Each
 * is looked for in its environment variable, then the state directory's cache, then PATH, and built with Go into the
 * cache as the last resort.
 */
export interface GoTool {
  /** What a person calls it. */
  what: string;
  /** The binary's name, on PATH and in the cache (as in Temporal's images). */
  exe: string;
  /** The name `go install` gives it: its package's directory. */
  builtAs: string;
  /** The environment variable that names a binary to use instead. */
  envVar: string;
  goPackage: string;
  version: string;
  /** Where else to get it, as told when it cannot be had. */
  elsewhere: string;
}

const exe = (name: string) => (process.platform === 'win32' ? `${name}.exe` : name);

/** The Temporal CLI release tablefate builds and is tested with (its dev server is Temporal Server 1.29). */
export const TEMPORAL_CLI_VERSION = '1.5.1';
/** The Temporal Server release inside that CLI: a cluster runs the same. */
export const TEMPORAL_SERVER_VERSION = '1.29.1';

export const TEMPORAL_CLI: GoTool = {
  what: 'the Temporal CLI (temporal)',
  exe: exe('temporal'),
  builtAs: exe('temporal'),
  envVar: 'TEMPORAL_CLI_PATH',
  goPackage: 'github.com/temporalio/cli/cmd/temporal',
  version: TEMPORAL_CLI_VERSION,
  elsewhere: 'install it from https://docs.temporal.io/cli',
};

/** The server (`server start --service frontend|history|matching|worker`): its module has no replace directive. */
export const TEMPORAL_SERVER: GoTool = {
  what: 'the Temporal server',
  exe: exe('temporal-server'),
  builtAs: exe('server'),
  envVar: 'TEMPORAL_SERVER_PATH',
  goPackage: 'go.temporal.io/server/cmd/server',
  version: TEMPORAL_SERVER_VERSION,
  elsewhere: 'use the temporalio/server image of the same release',
};

/** The server's schema tool for SQL stores (create-database, setup-schema, update-schema). */
export const TEMPORAL_SQL_TOOL: GoTool = {
  what: "the Temporal server's SQL schema tool",
  exe: exe('temporal-sql-tool'),
  builtAs: exe('sql'),
  envVar: 'TEMPORAL_SQL_TOOL_PATH',
  goPackage: 'go.temporal.io/server/cmd/tools/sql',
  version: TEMPORAL_SERVER_VERSION,
  elsewhere: 'use temporal-sql-tool from the temporalio/admin-tools image of the same release',
};

/** The Temporal web UI's server, the release inside CLI 1.5.1 (its module embeds the UI; no replace directive either). */
export const TEMPORAL_UI_SERVER: GoTool = {
  what: 'the Temporal web UI server',
  exe: exe('temporal-ui-server'),
  builtAs: exe('server'),
  envVar: 'TEMPORAL_UI_SERVER_PATH',
  goPackage: 'github.com/temporalio/ui-server/v2/cmd/server',
  version: '2.42.1',
  elsewhere: 'use the temporalio/ui image of the same release, or run the cluster headless',
};

/** How a tool is installed by hand, as told to users. */
export const installCommand = (tool: GoTool) => `go install ${tool.goPackage}@v${tool.version}`;

/** The command that installs the CLI, as told to users. */
export const TEMPORAL_CLI_INSTALL_COMMAND = installCommand(TEMPORAL_CLI);

const GO_EXE = exe('go');
/** Partial builds older than this are left over from an interrupted build and are removed. */
const STALE_BUILD_MS = 6 * 3600 * 1000;

export interface FindToolOptions {
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
 * Finds the Temporal CLI (which contains the dev server) and returns its absolute path: see findGoTool.
 */
export function findTemporalCli(opts: FindToolOptions): Promise<string> {
  return findGoTool(TEMPORAL_CLI, opts);
}

/**
 * Finds `tool` and returns its absolute path. In order: its environment variable; the copy cached in `<stateDir>/bin`;
 * on PATH; a build with Go into the cache (minutes, once). Throws, saying how to install it, if none of these works.
 */
export async function findGoTool(tool: GoTool, opts: FindToolOptions): Promise<string> {
  const log = opts.log ?? defaultLog;

  const fromEnv = process.env[tool.envVar];
  if (fromEnv) {
    const file = path.resolve(fromEnv);
    const problem = await notExecutable(file);
    if (problem) {
      throw new Error(
        `${tool.envVar} is set to "${fromEnv}", but ${file} is ${problem === 'no such file' ? 'not there' : problem}: ` +
          `point it at ${tool.what}'s binary, or unset it to use the cached or PATH copy`,
      );
    }
    return file;
  }

  const binDir = path.resolve(statePaths(opts.stateDir).bin);
  const cached = path.join(binDir, tool.exe);
  if ((await notExecutable(cached)) === null) return cached;

  const fromPath = await onPath(tool.exe);
  if (fromPath) return fromPath;

  const go = await onPath(GO_EXE);
  if (go) return buildWithGo(tool, go, binDir, cached, log);

  throw new Error(
    `${tool.what} was not found: not in ${cached}, not on PATH, and Go is not installed to build it. ` +
      `Install it with \`GOBIN=${binDir} ${installCommand(tool)}\` (Go 1.25 or newer), ` +
      `or set ${tool.envVar} to an existing binary, or ${tool.elsewhere}`,
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
 * `go install`s the tool into a private directory inside `binDir`, then renames the binary onto `target`.
 * A rename within one directory is atomic, so concurrent or interrupted builds never leave a partial binary
 * at `target`.
 */
async function buildWithGo(tool: GoTool, go: string, binDir: string, target: string, log: (line: string) => void): Promise<string> {
  await fs.promises.mkdir(binDir, { recursive: true });
  await removeStaleBuilds(binDir);
  const buildDir = await fs.promises.mkdtemp(path.join(binDir, '.build-'));
  const started = Date.now();
  log(`building ${tool.what} v${tool.version} with Go into ${binDir}; the first build takes a few minutes`);
  const heartbeat = setInterval(() => {
    log(`still building ${tool.what} (${Math.round((Date.now() - started) / 1000)} s so far)`);
  }, 30_000);
  heartbeat.unref();
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(go, ['install', `${tool.goPackage}@v${tool.version}`], {
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
              `\`${installCommand(tool)}\` failed (${signal ? `signal ${signal}` : `exit code ${String(code)}`}); ` +
                `see go's output above. Alternatively set ${tool.envVar} to ${tool.what}'s binary, or ${tool.elsewhere}`,
            ),
          );
      });
    });
    const built = path.join(buildDir, tool.builtAs);
    const problem = await notExecutable(built);
    if (problem) throw new Error(`go install succeeded but ${built} is ${problem}`);
    await fs.promises.rename(built, target);
  } finally {
    clearInterval(heartbeat);
    await fs.promises.rm(buildDir, { recursive: true, force: true });
  }
  log(`built ${tool.what} into ${target} in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}

/** The environment variable that names the server's PostgreSQL schema directory instead of its Go module's. */
export const TEMPORAL_SCHEMA_DIR_ENV = 'TEMPORAL_SCHEMA_DIR';

/**
 * The server's PostgreSQL schema files (`temporal/versioned`, `visibility/versioned`), of the release the cluster runs:
 * $TEMPORAL_SCHEMA_DIR, or `schema/postgresql/v12` in the server's Go module source, which `go mod download` fetches
 * into Go's module cache (at once when the server was built here).
 */
export async function findServerSchemas(opts: FindToolOptions): Promise<string> {
  const fromEnv = process.env[TEMPORAL_SCHEMA_DIR_ENV];
  const module = `go.temporal.io/server@v${TEMPORAL_SERVER_VERSION}`;
  let dir: string;
  if (fromEnv) {
    dir = path.resolve(fromEnv);
  } else {
    const go = await onPath(GO_EXE);
    if (!go) {
      throw new Error(
        `the Temporal server's schema files were not found: Go is not installed to fetch ${module}. ` +
          `Set ${TEMPORAL_SCHEMA_DIR_ENV} to a copy of its schema/postgresql/v12 directory (the admin-tools image has it at ` +
          `/etc/temporal/schema/postgresql/v12)`,
      );
    }
    (opts.log ?? defaultLog)(`looking up the schema files of ${module} (go mod download)`);
    const { stdout } = await execFileAsync(go, ['mod', 'download', '-json', module], { maxBuffer: 1 << 20 }).catch((err: unknown) => {
      const failed = err as { stdout?: string; message: string };
      throw new Error(`\`go mod download -json ${module}\` failed: ${failed.stdout?.trim() || failed.message}`);
    });
    dir = path.join((JSON.parse(stdout) as { Dir: string }).Dir, 'schema', 'postgresql', 'v12');
  }
  for (const sub of ['temporal/versioned', 'visibility/versioned']) {
    if (!fs.existsSync(path.join(dir, sub))) {
      throw new Error(`${dir} holds no ${sub}: not the PostgreSQL (v12) schema directory of the Temporal server`);
    }
  }
  return dir;
}
