/**
 * The mark the engine's worker puts on a call's answer (test/engine/engine.ts) when the workflow task that receives the
 * answer is to be lost (test/engine/lose-task.ts strips it, and fails that task). A module of its own: the worker's
 * side and the workflow's both read it, and the workflow's bundle must not load the worker's code.
 */
export const LOSE_TASK = '__engineLosesThisTask';
