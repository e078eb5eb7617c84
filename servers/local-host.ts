import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

/** The Temporal processes tablefate starts on this host listen here only. */
export const HOST = '127.0.0.1';
/** How many of a process's last log lines an error shows. */
export const LOG_TAIL_LINES = 20;

/** `n` distinct ports that were free a moment ago (bound to port 0 on 127.0.0.1 together, then released). */
export async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, HOST, () => resolve());
      });
      ports.push((server.address() as net.AddressInfo).port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/**
 * Throws if `port` cannot be bound on 127.0.0.1. Without this, a server that fails to bind a given port
 * would look ready: the readiness probe would reach whatever already listens there.
 */
export async function assertPortFree(port: number, what: string, starting: string): Promise<void> {
  const server = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, HOST, () => resolve());
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(
      `cannot start ${starting}: ${what} ${HOST}:${port} is ${code === 'EADDRINUSE' ? 'already in use' : `unusable (${code ?? String(err)})`}`,
    );
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` right now. */
export function tcpAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port });
    socket.setTimeout(1000);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/** The last `lines` lines written to `file` from byte `from` on. */
export async function logTail(file: string, from: number, lines = LOG_TAIL_LINES): Promise<string> {
  try {
    const handle = await fs.promises.open(file, 'r');
    try {
      const { size } = await handle.stat();
      const start = Math.max(from, size - 64 * 1024);
      const buffer = Buffer.alloc(Math.max(0, size - start));
      await handle.read(buffer, 0, buffer.length, start);
      const text = buffer.toString('utf8').trimEnd();
      return text ? text.split('\n').slice(-lines).join('\n') : '(nothing)';
    } finally {
      await handle.close();
    }
  } catch (err) {
    return `(cannot read the log: ${(err as Error).message})`;
  }
}

/**
 * `n` distinct ports in [`low`, `high`] that were free a moment ago, tried at random. For ports below the ephemeral
 * range (Temporal keeps a membership port in a smallint column: at most 32767), which port 0 never hands out.
 */
export async function freePortsBetween(n: number, low: number, high: number): Promise<number[]> {
  const ports: number[] = [];
  for (let tries = 0; ports.length < n; tries++) {
    if (tries > 50 * n) throw new Error(`no ${n} free ports between ${low} and ${high} on ${HOST}`);
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (ports.includes(port)) continue;
    if (await canBind(port)) ports.push(port);
  }
  return ports;
}

function canBind(port: number): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** How a server process ended. */
export interface ServerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** How a server process ended, as an error says it. */
export function describeExit(exit: ServerExit): string {
  if (exit.error) return `could not be run (${exit.error.message})`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${String(exit.code)}`;
}

/**
 * Runs a local server program, its output appended to `logFile`. The server must not outlive us: it is killed on any exit
 * of this process that runs 'exit' handlers (`killOnExit`, to take off once it is stopped on purpose). It does not hold
 * our event loop open: a test file's last test may end while it runs, and the 'exit' handler then kills it.
 */
export function spawnServer(
  program: string,
  args: readonly string[],
  logFile: string,
): { child: ChildProcess; exited: Promise<ServerExit>; killOnExit: () => void } {
  const fd = fs.openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(program, args, { stdio: ['ignore', fd, fd] });
  } finally {
    fs.closeSync(fd);
  }
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.on('exit', killOnExit);
  const exited = new Promise<ServerExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
  });
  void exited.then(() => process.off('exit', killOnExit));
  child.unref();
  return { child, exited, killOnExit };
}
