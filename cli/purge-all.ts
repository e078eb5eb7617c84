import type { PurgeAllSummary, TableFateClient, WriteOptions } from '../client/client';
import type { CliIo } from './io';
import { formatTableList } from './format';

/**
 * `tablefate purge --all [--namespace ns] --yes`: every trashed table that is not held, purged a few at a time, with a
 * progress line on a terminal and a summary at the end. Without `--yes` it lists what it would purge and changes
 * nothing. Exit 0 when every purge it tried succeeded, 7 when one failed.
 */
export async function purgeAllCommand(
  client: TableFateClient,
  request: { namespace?: string },
  opts: WriteOptions & { yes: boolean; json: boolean; io: CliIo },
): Promise<number> {
  const { io, json } = opts;
  if (!opts.yes) {
    const plan = await client.planPurgeAll(request);
    if (json) {
      io.out(JSON.stringify({ wouldPurge: plan.purge, held: plan.held }, null, 2));
      return 0;
    }
    io.out(plan.purge.length === 0 ? 'nothing to purge' : `would purge ${plan.purge.length} table(s):\n${formatTableList(plan.purge)}`);
    if (plan.held.length > 0) io.out(`held, never purged (${plan.held.length}): ${plan.held.map((t) => t.id).join(' ')}`);
    if (plan.purge.length > 0) io.out('nothing was changed: run again with --yes to purge them');
    return 0;
  }
  const live = io.errIsTTY && !json;
  const summary = await client.purgeAll(request, {
    ...opts,
    onProgress: live
      ? (p) => io.err(`purge --all: ${p.done}/${p.total} (purged ${p.purged}, held ${p.held}, failed ${p.failed})`)
      : undefined,
  });
  io.out(json ? JSON.stringify(summary, null, 2) : describeSummary(summary));
  return summary.failed.length > 0 ? 7 : 0;
}

function describeSummary(s: PurgeAllSummary): string {
  const lines = [
    `purged ${s.purged.length}${s.purged.length ? `: ${s.purged.join(' ')}` : ''}`,
    `held ${s.held.length}${s.held.length ? `: ${s.held.join(' ')}` : ''}`,
    `skipped ${s.skipped.length}${s.skipped.length ? ` (recalled or purged meanwhile): ${s.skipped.map((x) => x.id).join(' ')}` : ''}`,
    `failed ${s.failed.length}`,
    ...s.failed.map((f) => `  table ${f.id}: ${f.error}`),
  ];
  return lines.join('\n');
}
