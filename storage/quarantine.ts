import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { errnoOf, messageOf, type QuarantineMarker } from './errors';
import { existingNodes } from './nodes';

/**
 * A storage node that met a fatal error is quarantined by a file in its directory,
 * `<storage root>/<node>/QUARANTINED` (JSON: reason, since, pid, host). Every worker sharing the storage
 * directory reads it before touching the node, so one fatal error keeps them all off it, across restarts,
 * until an operator has looked and run `tablefate quarantine clear <node>`.
 */
export const QUARANTINE_FILE = 'QUARANTINED';

export function quarantineFile(root: string, node: string): string {
  return path.join(root, node, QUARANTINE_FILE);
}

/** The node's marker, or null when it is not quarantined. A marker that cannot be parsed still quarantines. */
export async function readQuarantine(root: string, node: string): Promise<QuarantineMarker | null> {
  const file = quarantineFile(root, node);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    const code = errnoOf(error);
    // ENOTDIR: the node's "directory" is not one; the operation on it fails on its own, with its errno.
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw error;
  }
  const unreadable = (why: string): QuarantineMarker => ({
    node,
    reason: `marker ${file} is unreadable (${why})`,
    since: 'an unknown time',
    pid: 0,
    host: 'unknown',
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return unreadable(messageOf(error));
  }
  if (typeof parsed !== 'object' || parsed === null) return unreadable('not a JSON object');
  const m = parsed as Partial<Record<keyof QuarantineMarker, unknown>>;
  return {
    node,
    reason: typeof m.reason === 'string' ? m.reason : 'no reason recorded',
    since: typeof m.since === 'string' ? m.since : 'an unknown time',
    pid: typeof m.pid === 'number' ? m.pid : 0,
    host: typeof m.host === 'string' ? m.host : 'unknown',
  };
}

/**
 * Quarantines a node. A node already quarantined keeps its first marker: the first fatal error is the one an
 * operator needs to see. Written to a temporary name and renamed, so a reader never sees half a marker.
 */
export async function writeQuarantine(root: string, node: string, reason: string): Promise<QuarantineMarker> {
  const existing = await readQuarantine(root, node);
  if (existing) return existing;
  const marker: QuarantineMarker = { node, reason, since: new Date().toISOString(), pid: process.pid, host: os.hostname() };
  const file = quarantineFile(root, node);
  await fs.mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.writeFile(temp, `${JSON.stringify(marker, null, 2)}\n`);
    await fs.rename(temp, file);
  } catch (error) {
    await fs.rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
  return marker;
}

/** Lifts a node's quarantine; returns the marker it removed, or null if the node was not quarantined. */
export async function clearQuarantine(root: string, node: string): Promise<QuarantineMarker | null> {
  const marker = await readQuarantine(root, node);
  if (!marker) return null;
  await fs.rm(quarantineFile(root, node), { force: true });
  return marker;
}

/** Every quarantined node among those that exist under the storage root, in node order. */
export async function listQuarantined(root: string): Promise<QuarantineMarker[]> {
  const markers = await Promise.all((await existingNodes(root)).map((node) => readQuarantine(root, node)));
  return markers.filter((m): m is QuarantineMarker => m !== null);
}
