import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/**
 * The `tablefate` command line as a person runs it: `node bin/tablefate.js ...` in a child process, from the
 * project root, with an environment of the test's choosing (TABLEFATE_HOME, TEMPORAL_ADDRESS, ...).
 */

export const PROJECT_ROOT = path.resolve(__dirname, '../..');
/** The command line's entry point. */
export const BIN = path.join(PROJECT_ROOT, 'bin', 'tablefate.js');

export interface CliResult {
  args: readonly string[];
  /** The exit code; null if a signal ended the process. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stderr as lines (the final newline does not make an empty last line). */
  stderrLines: string[];
  ms: number;
}

export interface CliOptions {
  env: NodeJS.ProcessEnv;
  /** Kill the command (SIGKILL) and fail after this long; 60 s by default. */
  timeoutMs?: number;
  /** The working directory (the project's by default): a client on another host runs from anywhere. */
  cwd?: string;
}

function lines(text: string): string[] {
  if (text === '') return [];
  return (text.endsWith('\n') ? text.slice(0, -1) : text).split('\n');
}

function spawnCli(args: readonly string[], env: NodeJS.ProcessEnv, cwd = PROJECT_ROOT): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs one command to its end. Never rejects for a non-zero exit: the exit code is part of the result. */
export function runCli(args: readonly string[], opts: CliOptions): Promise<CliResult> {
  const started = Date.now();
  const child = spawnCli(args, opts.env, opts.cwd);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`tablefate ${args.join(' ')} did not finish in ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    // 'close', not 'exit': all of stdout and stderr has been read by then.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ args, code, signal, stdout, stderr, stderrLines: lines(stderr), ms: Date.now() - started });
    });
  });
}

/**
 * Runs one command in this process, through the same entry point as bin/tablefate.js (cli/main.ts's `main`), with
 * its own environment and output: what a person sees of it, without the cost of a Node process. For input that is
 * refused before anything starts; the wiring of a real process (exit code, streams) is what runCli tests.
 */
export async function runCliInProcess(args: readonly string[], opts: Pick<CliOptions, 'env'>): Promise<CliResult> {
  const started = Date.now();
  let stdout = '';
  let stderr = '';
  // Loaded on first use: the files that only spawn the command line do not pay for the SDK and the catalog.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { main } = require('../../cli/main') as typeof import('../../cli/main');
  const code = await main([...args], {
    env: opts.env,
    out: (text) => (stdout += `${text}\n`),
    err: (text) => (stderr += `${text}\n`),
    errIsTTY: false,
  });
  return { args, code, signal: null, stdout, stderr, stderrLines: lines(stderr), ms: Date.now() - started };
}

/** Runs commands in this process, one after another; results in order. */
export async function runCliAllInProcess(argsList: ReadonlyArray<readonly string[]>, opts: Pick<CliOptions, 'env'>): Promise<CliResult[]> {
  const results: CliResult[] = [];
  for (const args of argsList) results.push(await runCliInProcess(args, opts));
  return results;
}

/** Runs commands, at most `concurrency` at a time (each is a Node process: mind the cores); results in order. */
export async function runCliAll(argsList: ReadonlyArray<readonly string[]>, opts: CliOptions, concurrency = 4): Promise<CliResult[]> {
  const results: CliResult[] = new Array<CliResult>(argsList.length);
  let next = 0;
  const lane = async () => {
    while (next < argsList.length) {
      const i = next++;
      results[i] = await runCli(argsList[i]!, opts);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, argsList.length) }, lane));
  return results;
}

/** The stdout of a command that must have succeeded, parsed as JSON; throws with the command's output otherwise. */
export function jsonOf<T>(result: CliResult): T {
  if (result.code !== 0) {
    throw new Error(`tablefate ${result.args.join(' ')} exited ${result.code ?? result.signal}; stderr: ${result.stderr}`);
  }
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(`tablefate ${result.args.join(' ')} printed no JSON; stdout: ${result.stdout}`);
  }
}

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A long-running command (`tablefate worker`), with its output collected while it runs. */
export class CliProcess {
  stdout = '';
  stderr = '';
  /** Settles when the process has exited and its output is read. */
  readonly exited: Promise<CliExit>;
  private exit: CliExit | undefined;

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
  }

  static start(args: readonly string[], env: NodeJS.ProcessEnv): CliProcess {
    return new CliProcess(spawnCli(args, env));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** How it ended, or undefined while it runs. */
  get exitStatus(): CliExit | undefined {
    return this.exit;
  }

  /** Sends `signal` and waits for the exit; SIGKILLs it and throws if it has not exited after `timeoutMs`. */
  async stop(signal: NodeJS.Signals = 'SIGINT', timeoutMs = 30_000): Promise<CliExit> {
    if (this.exit) return this.exit;
    this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const outcome = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.child.kill('SIGKILL');
      await this.exited;
      throw new Error(`process ${this.pid} did not exit within ${timeoutMs} ms of ${signal}; stderr: ${this.stderr}`);
    }
    return outcome;
  }
}
