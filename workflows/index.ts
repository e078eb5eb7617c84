// The workflows a tablefate worker runs: one per operation.
import * as v18 from './legacy/v18';
import * as v19 from './legacy/v19';
import type { TrashRunInput } from './legacy/v19/input';
import type { TrashInput } from '../domain/operation-inputs';
import { takes } from './patches';
import { createTable as create } from './create';
import { trashTable as trash } from './trash';
import { undeleteTable as undelete } from './undelete';
import { purgeTable as purge } from './purge';
import { renameTable as rename } from './rename';
import { holdTable as hold } from './hold';

/** A run started before the step executor (v18) goes on with v18's code, which its history was made by. */
const sinceV19 =
  <I, O>(current: (input: I) => Promise<O>, before: (input: I) => Promise<O>) =>
  (input: I): Promise<O> =>
    takes('stepExecutor') ? current(input) : before(input);

export const createTable = sinceV19(create, v18.createTable);
/**
 * A drop since v20 ends at TRASHED; a trash run as v19 made it (started on v19, or asked with the request id a v19 client
 * or reconcile pass gives) waits out its expiry in the same run, on v19's code.
 */
export const trashTable = (input: TrashInput | TrashRunInput) =>
  takes('dropEndsAtTrashed') && !('requestId' in input) ? trash(input) : sinceV19(v19.trashTable, v18.trashTable)(input as TrashRunInput);
export const undeleteTable = sinceV19(undelete, v18.undeleteTable);
export const purgeTable = sinceV19(purge, v18.purgeTable);
export const renameTable = sinceV19(rename, v18.renameTable);
export const holdTable = sinceV19(hold, v18.holdTable);
export { adoptTrashTable } from './adopt-trash';
export { truncateTable } from './truncate';
export { recallInPlace } from './recall-in-place';
export { trashExpiry } from './trash-expiry';
export { reconcileTables } from './reconcile';
export { measureTables } from './measure';
export { planDrop } from './plan-drop';
export { leaseTable } from './lease';
export { configureTrash } from './configure';
export { evictTrash } from './evict';
// The contract's calls, for services in any language (domain/contract.ts): tablefate.v1.<call>.
export * from './contract';
