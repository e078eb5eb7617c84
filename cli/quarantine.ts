import path from 'node:path';
import { parseArgs } from 'node:util';
import { statePaths, type Config } from '../worker/config';
import type { QuarantineMarker } from '../storage/errors';
import { existingNodes, nodeName } from '../storage/nodes';
import { clearQuarantine, listQuarantined, readQuarantine } from '../storage/quarantine';
import { renderRows } from './format';

/**
 * `tablefate quarantine [--json]`: the storage nodes a fatal error has quarantined, with why and since when.
 * `tablefate quarantine clear <node> [--json]`: lets workers use the node again, once an operator has looked.
 *
 * Both read `$TABLEFATE_HOME/storage` (or `--dir`, a storage node's) directly: no server, no worker needed (the node may be quarantined
 * precisely because no worker can run). Exit codes: 0 ok; 2 usage, or a node name that is neither configured
 * (TABLEFATE_STORAGE_NODES) nor present on disk; 3 the node is not quarantined; 1 anything else.
 */

export const QUARANTINE_USAGE = `usage: tablefate quarantine [--dir <path>] [--json]             quarantined storage nodes, with reasons
       tablefate quarantine clear <node> [--dir <path>] [--json]  let workers use <node> again (exit 3 if not quarantined)
  --dir: the directory a storage node was started with (storage-node <node> --dir <path>); default
         $TABLEFATE_HOME/storage, where \`tablefate worker\` and \`dev\` keep every node`;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

class QuarantineCommandError extends Error {
  constructor(
    readonly kind: string,
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ');

function formatMarkers(markers: readonly QuarantineMarker[]): string {
  if (markers.length === 0) return 'no storage node is quarantined';
  return renderRows([
    ['NODE', 'SINCE', 'PID', 'HOST', 'REASON'],
    ...markers.map((m) => [m.node, m.since, String(m.pid), m.host, oneLine(m.reason)]),
  ]);
}

/** Runs `tablefate quarantine ...` (args after the word `quarantine`); returns the exit code. */
export async function quarantineCommand(args: string[], config: Config, io: Io): Promise<number> {
  let json = args.includes('--json');
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args,
        options: { json: { type: 'boolean' }, dir: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new QuarantineCommandError('Usage', 2, `quarantine: ${(err as Error).message}`);
    }
    json = parsed.values.json === true;
    if (parsed.values.help) {
      io.out(QUARANTINE_USAGE);
      return 0;
    }
    // A storage node's own directory (`tablefate storage-node <node> --dir <path>`), or the in-process nodes'.
    const root = parsed.values.dir === undefined ? statePaths(config.home).storage : path.resolve(parsed.values.dir);
    const [action, node, ...extra] = parsed.positionals;

    if (action === undefined || (action === 'list' && node === undefined)) {
      const markers = await listQuarantined(root);
      io.out(json ? JSON.stringify(markers, null, 2) : formatMarkers(markers));
      return 0;
    }
    if (action !== 'clear' || node === undefined || extra.length > 0) {
      throw new QuarantineCommandError(
        'Usage',
        2,
        `quarantine: expected nothing, \`list\` or \`clear <node>\`, got "${parsed.positionals.join(' ')}"`,
      );
    }

    const configured = Array.from({ length: config.storageNodes }, (_, k) => nodeName(k));
    const known = [...new Set([...configured, ...(await existingNodes(root))])];
    if (!known.includes(node)) {
      throw new QuarantineCommandError('InvalidInput', 2, `unknown storage node "${node}"; nodes are ${known.join(', ')}`);
    }
    if (!(await readQuarantine(root, node))) {
      throw new QuarantineCommandError('NotQuarantined', 3, `${node} is not quarantined`);
    }
    const cleared = await clearQuarantine(root, node);
    if (!cleared) throw new QuarantineCommandError('NotQuarantined', 3, `${node} is not quarantined`);
    io.out(
      json
        ? JSON.stringify(cleared, null, 2)
        : `${node}: quarantine cleared (quarantined since ${cleared.since}: ${oneLine(cleared.reason)})`,
    );
    return 0;
  } catch (err) {
    const kind = err instanceof QuarantineCommandError ? err.kind : 'Error';
    const message = oneLine(err instanceof Error ? err.message : String(err));
    io.err(json ? JSON.stringify({ error: kind, message }) : `tablefate: ${kind}: ${message}`);
    return err instanceof QuarantineCommandError ? err.exitCode : 1;
  }
}
