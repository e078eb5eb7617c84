import { randomUUID } from 'node:crypto';
import type { ReconcileReport } from '../domain/health';
import { OPERATIONS } from '../domain/operations';
import type { reconcileTables } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import type { WriteOptions } from './options';
import { startAndWait } from './start';

/** The doctor's report: a reconcile run of its own in report mode, which reads the catalog and every node and changes nothing. */
export async function health(ctx: ClientContext, opts: WriteOptions): Promise<ReconcileReport> {
  const timeoutMs = callTimeout(ctx, opts);
  const record = OPERATIONS.reconcile;
  const workflowId = record.workflowId({ mode: 'report', requestId: randomUUID() }, ctx.catalog.id);
  return startAndWait<typeof reconcileTables>(ctx, {
    workflowId,
    what: 'health report',
    check: `the workflow ${workflowId} in the web UI`,
    timeoutMs,
    run: { record, input: { mode: 'report' }, target: {}, summary: 'doctor: what the reconciler would do now (changes nothing)' },
  });
}
