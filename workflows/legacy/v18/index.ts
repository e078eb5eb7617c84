// The operations as release v18 ran them: the runs it started replay and finish on this code. Retired with the patch
// `step-executor` (workflows/patches.ts), as docs/changing-workflows.md says.
export { createTable } from './create';
export { trashTable } from './trash';
export { undeleteTable } from './undelete';
export { purgeTable } from './purge';
export { renameTable } from './rename';
export { holdTable } from './hold';
