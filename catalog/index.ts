export type * from './catalog';
export { CatalogNotFoundError } from './catalog';
export { SqliteCatalog } from './sqlite';
export { LockLostError } from './lock-lost';
