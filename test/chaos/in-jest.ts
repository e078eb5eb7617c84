import { formatReport } from './report';
import { runChaos } from './runner';
import type { ChaosOptions, ChaosReport } from './run-options';

/**
 * A chaos run inside a jest test: the run's progress is kept quiet unless the run found a problem, and then printed
 * with its report, so that a failing test shows what happened.
 */
export async function runChaosInTest(options: Omit<ChaosOptions, 'log'>): Promise<ChaosReport> {
  const progress: string[] = [];
  const report = await runChaos({ ...options, log: (line) => progress.push(line) });
  if (report.problems.length > 0) console.log(`${formatReport(report)}\n\nprogress:\n${progress.join('\n')}`);
  return report;
}
