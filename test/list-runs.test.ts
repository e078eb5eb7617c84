import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { listRuns, operationsQuery } from '../client/operations';
import { testNamespace, testServerAddress } from './support/test-server';

/**
 * `listRuns` (what `tablefate ops` and `history` read) on the real server's visibility: a limit asks for pages a little
 * past it, so a namespace shared by catalogs takes it several pages to find a catalog's newest runs; none may be missed.
 */
test("a catalog's newest runs are found across pages of another catalog's runs, newest first", async () => {
  const connection = await Connection.connect({ address: testServerAddress() });
  const client = new Client({ connection, namespace: testNamespace() });
  // Catalog ids of this test's own, and a table id no other test uses, so that the query sees these runs only.
  const [mine, theirs] = [randomUUID().slice(0, 8), randomUUID().slice(0, 8)];
  const tableId = 900_000_000 + Math.floor(Math.random() * 1_000_000);
  try {
    const started: string[] = [];
    // Three of theirs between each two of mine, each closed (terminated) in the order it started.
    for (let i = 0; i < 4; i++) {
      for (const [catalog, n] of [
        [mine, 1],
        [theirs, 3],
      ] as const) {
        for (let k = 0; k < n; k++) {
          const workflowId = `create:list.t${i}-${k}@${catalog}`;
          const handle = await client.workflow.start('tablefateNoSuchWorkflow', {
            taskQueue: `list-runs-${randomUUID()}`,
            workflowId,
            typedSearchAttributes: [
              { key: SEARCH_ATTRIBUTES.tableOp, value: 'create' },
              { key: SEARCH_ATTRIBUTES.tableId, value: tableId },
            ],
          });
          await handle.terminate('listed, not run');
          if (catalog === mine) started.push(workflowId);
        }
      }
    }
    const query = operationsQuery({ tableId });
    // Visibility is eventually consistent: wait until the server lists all sixteen.
    for (let tries = 0; (await listRuns(client, mine, query)).length + (await listRuns(client, theirs, query)).length < 16; tries++) {
      if (tries > 100) throw new Error('the runs never showed in visibility');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await listRuns(client, mine, query, 2)).map((r) => r.workflowId)).toEqual([started[3], started[2]]);
    expect((await listRuns(client, mine, query, 1)).map((r) => r.workflowId)).toEqual([started[3]]);
    expect((await listRuns(client, mine, query)).map((r) => r.workflowId)).toEqual([...started].reverse());
    expect(await listRuns(client, theirs, query, 12)).toHaveLength(12);
  } finally {
    await connection.close();
  }
});
