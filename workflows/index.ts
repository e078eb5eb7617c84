// The workflows a tablefate worker runs: one per operation.
export { createTable } from './create';
export { trashTable } from './trash';
export { undeleteTable } from './undelete';
export { purgeTable } from './purge';
export { reconcileTables } from './reconcile';
export { renameTable } from './rename';
export { measureTables } from './measure';
export { holdTable } from './hold';
export { leaseTable } from './lease';
export { configureTrash } from './configure';
export { evictTrash } from './evict';
// The contract's calls, for services in any language (domain/contract.ts): tablefate.v1.<call>.
export * from './contract';
