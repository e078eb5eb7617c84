// The trash's run as release v19 ran it (the drop, its answer, its expiry, in one run): the runs it started replay and
// finish on this code. Retired with the patch `drop-ends-at-trashed` (workflows/patches.ts), as
// docs/changing-workflows.md says.
export { trashTable } from './trash';
