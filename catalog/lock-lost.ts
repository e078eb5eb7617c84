/**
 * The workflow no longer holds the lock it is acting under (it was taken over after the workflow was thought
 * closed). Acting on would race another operation, so the step fails for good.
 */
export class LockLostError extends Error {
  override readonly name = 'LockLostError';
}
