import { OPERATIONS, requestRunId } from '../../domain/operations';

/*
 * A request's own run (the SQL door's): the operation's workflow id with the request's key before the catalog, so that
 * it stays a run of that catalog (`ops`, `cancel` and `history` find it by the `@<catalog>` suffix) and of that table.
 */

test("a request's run id keeps the operation's id and its catalog, the key between them", () => {
  const usual = OPERATIONS.trash.workflowId(42, '1f0c9a2e');
  expect(usual).toBe('drop:42@1f0c9a2e');
  expect(requestRunId(usual, 'sql.node-0.17.9c1e07aa')).toBe('drop:42~sql.node-0.17.9c1e07aa@1f0c9a2e');
  // An id of no catalog (runs from before catalogs had identities) takes the key at its end.
  expect(requestRunId('drop:42', 'sql.node-0.17.9c1e07aa')).toBe('drop:42~sql.node-0.17.9c1e07aa');
  // Two requests never share a run, nor share one with the operation's usual id.
  expect(requestRunId(usual, 'sql.node-0.17.9c1e07aa')).not.toBe(requestRunId(usual, 'sql.node-0.18.5b2d1c00'));
});
