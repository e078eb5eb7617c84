import { Harness } from './support/harness';
import { waitFor } from './support/wait';
import { workflowIdFor } from '../domain/operations';

describe('the reconciler', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ orphanGraceSeconds: 3 });
  });
  afterAll(async () => {
    await h.close();
  });

  test('a terminated trash run: the doctor reports the missing timer, the reconciler re-arms it and the table is purged at its expiry', async () => {
    const table = await h.client.create({ table: 'rec.terminated', shards: 2 });
    const trashed = await h.client.trash({ table: 'rec.terminated', retentionSeconds: 4 });
    await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).terminate('operator slip');

    const report = await h.reconcile('report');
    const missing = report.findings.filter((f) => f.kind === 'missing-timer');
    expect(missing.map((f) => f.table.id)).toEqual([table.id]);
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

    const repaired = await h.reconcile();
    expect(repaired.actions).toContainEqual(expect.objectContaining({ outcome: `started trash of table ${table.id}` }));
    const purged = await waitFor(() => h.catalog.getTable(table.id), (t) => t?.state === 'PURGED', { what: 'the purge at expiry' });
    expect(purged!.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
    expect((await h.reconcile('report')).findings).toEqual([]);
  });
});
