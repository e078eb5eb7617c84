import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { logTail, tcpAccepts } from './local-host';
import { CLUSTER_CONFIG_DIR, CLUSTER_CONFIG_ENV, environmentOf, writeUiConfig } from './cluster-config';
import { logOf, saveClusterState, type ClusterProcess, type ClusterState } from './cluster-state';

/**
 * A cluster's processes, each `temporal-server start --service X` (or the web UI's server) in a session of its own that
 * outlives the command line that started it: started, waited for until it listens, and stopped. A process is known by
 * its pid and the binary it runs, kept in the cluster's state.
 */

const STOP_GRACE_MS = 10_000;

/** Whether `pid` runs `exe` now (a pid reused by another program, or a zombie, is not ours). */
export function runs(pid: number | null, exe: string | null): boolean {
  if (pid === null || exe === null) return false;
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.split('\0')[0] === exe;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && fs.existsSync('/proc/self')) return false;
    // No /proc here: whether a process of that pid exists at all.
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/** The port that shows a process is up: the worker service serves no gRPC, only its membership (ringpop) port. */
export const listenPort = (proc: ClusterProcess) => (proc.service === 'worker' ? proc.membershipPort : proc.port);

/** Starts process `proc` in a session of its own (it outlives this command line), its output appended to its log. */
export async function spawnProcess(
  stateDir: string,
  state: ClusterState,
  proc: ClusterProcess,
  exe: string,
  log: (line: string) => void,
): Promise<void> {
  const args =
    proc.service === 'ui'
      ? ['--root', await writeUiConfig(stateDir, state, proc), '--config', '.', '--env', 'development', 'start']
      : ['--root', CLUSTER_CONFIG_DIR, '--config', '.', '--env', CLUSTER_CONFIG_ENV, '--allow-no-auth', 'start', '--service', proc.service];
  const logFile = logOf(stateDir, proc.name);
  await fs.promises.appendFile(logFile, `--- ${new Date().toISOString()} ${exe} ${args.join(' ')}\n`);
  const fd = fs.openSync(logFile, 'a');
  try {
    const child = spawn(exe, args, {
      detached: true,
      stdio: ['ignore', fd, fd],
      env: proc.service === 'ui' ? process.env : environmentOf(stateDir, state, proc),
      cwd: CLUSTER_CONFIG_DIR,
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.unref();
    proc.pid = child.pid!;
    proc.exe = exe;
  } finally {
    fs.closeSync(fd);
  }
  log(`${proc.name}: started (pid ${proc.pid}, port ${listenPort(proc)}, log ${logFile})`);
  await saveClusterState(stateDir, state);
}

/** Resolves once `proc`'s port accepts connections; throws with its log's tail if it exits or the deadline passes. */
export async function waitListening(stateDir: string, proc: ClusterProcess, deadline: number): Promise<void> {
  for (;;) {
    if (!runs(proc.pid, proc.exe)) {
      throw new Error(`${proc.name} exited while starting. Last lines of ${logOf(stateDir, proc.name)}:\n${await tail(stateDir, proc)}`);
    }
    if (await tcpAccepts(listenPort(proc))) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${proc.name} did not listen on port ${listenPort(proc)} in time. Last lines of its log:\n${await tail(stateDir, proc)}`,
      );
    }
    await sleep(200);
  }
}

/** The last lines of `proc`'s log, each cut short: the server logs JSON with whole stack traces. */
async function tail(stateDir: string, proc: ClusterProcess): Promise<string> {
  const text = await logTail(logOf(stateDir, proc.name), 0, 6);
  return text
    .split('\n')
    .map((line) => (line.length > 500 ? `${line.slice(0, 500)} ...` : line))
    .join('\n');
}

/** SIGTERM to each, SIGKILL to any still there after 10 s. */
export async function stopProcesses(
  stateDir: string,
  state: ClusterState,
  names: readonly string[],
  log: (line: string) => void,
): Promise<void> {
  const procs = state.processes.filter((p) => names.includes(p.name) && runs(p.pid, p.exe));
  for (const proc of procs) process.kill(proc.pid!, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (procs.some((p) => runs(p.pid, p.exe)) && Date.now() < deadline) await sleep(100);
  for (const proc of procs.filter((p) => runs(p.pid, p.exe))) {
    log(`${proc.name}: still there after ${STOP_GRACE_MS / 1000} s; SIGKILL`);
    process.kill(proc.pid!, 'SIGKILL');
  }
  while (procs.some((p) => runs(p.pid, p.exe))) await sleep(50);
  for (const proc of state.processes.filter((p) => names.includes(p.name))) {
    proc.pid = null;
    proc.exe = null;
  }
  await saveClusterState(stateDir, state);
}
