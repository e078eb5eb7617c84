export type * from './catalog';
export { SqliteCatalog } from './sqlite';
export { LockLostError } from './lock-lost';
