import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CallScope } from '../domain/contracts';
import type { TableState } from '../domain/states';

/** Transient faults are retried with backoff (bounded by the worker); domain failures come back non-retryable. */
export const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' } as const;

/**
 * The catalog's calls are short transactions on the worker's own catalog: local activities, run by the worker in the
 * workflow task that asks for them, without a round trip through the server's task queues.
 */
const catalog = proxyLocalActivities<
  Pick<
    Activities,
    | 'getTable'
    | 'tryLock'
    | 'releaseLock'
    | 'changeExpiry'
    | 'changeLease'
    | 'changeSetting'
    | 'trashPage'
    | 'wakeTrash'
    | 'requestEviction'
  >
>({ startToCloseTimeout: '30s', retry: RETRY });

type Args<F> = F extends (input: infer I) => unknown ? Omit<I, keyof CallScope> : never;

/** The calls a run has numbered so far: module state is the run's own (the SDK gives each run its copy of the bundle). */
let numbered = 0;

/**
 * The key under which the catalog journals the run's next call: its place in the run, numbered in the order the run makes
 * its calls (deterministic, like all workflow code), so that a call made again because the workflow task that made it
 * was lost answers what it answered the first time. Every call of a run takes its number here, whoever makes it.
 */
export function nextCall(name: string): string {
  return `${++numbered}:${name}`;
}

/** A local activity called with a summary the web UI shows beside it. */
export const said = (summary: string) => ({ summary });

/** The catalog calls of a run of catalog `catalogId` that are not an operation's steps (those are workflows/execute.ts's). */
export function catalogCalls(catalogId: string | undefined) {
  const scope: CallScope = { catalogId };
  const step = (name: string): CallScope => ({ catalogId, step: nextCall(name) });
  return {
    scope,
    getTable: (tableId: number) => catalog.getTable.executeWithOptions(said(`read table ${tableId}`), [{ tableId, ...step('getTable') }]),
    /** One try at `lock` (the reconciler's, around an orphan's collection). */
    tryLock: (lock: string) => catalog.tryLock.executeWithOptions(said(`take lock ${lock}`), [{ lock, ...step('tryLock') }]),
    /** Releases every lock the run holds. */
    releaseLocks: () => catalog.releaseLock.executeWithOptions(said("release this run's locks"), [scope]),
    changeExpiry: (args: Args<Activities['changeExpiry']>) =>
      catalog.changeExpiry.executeWithOptions(said(`table ${args.tableId} expires at ${new Date(args.expireAt).toISOString()}`), [
        { ...args, ...step('changeExpiry') },
      ]),
    changeLease: (args: Args<Activities['changeLease']>) =>
      catalog.changeLease.executeWithOptions(said(`lease ${args.request.action}`), [{ ...args, ...step('changeLease') }]),
    changeSetting: (args: Args<Activities['changeSetting']>) =>
      catalog.changeSetting.executeWithOptions(
        said(`${'value' in args ? 'set' : 'unset'} ${args.key}${args.namespace ? ` for ${args.namespace}` : ''}`),
        [{ ...args, ...step('changeSetting') }],
      ),
    trashPage: (afterId: number) =>
      catalog.trashPage.executeWithOptions(said(`read the trash after table ${afterId}`), [{ afterId, ...scope }]),
    /** Tells the runs waiting on the table (a draining drop, the expiry) to read it again, if it is in one of `states` (any, without). */
    wakeTrash: (tableId: number, states?: TableState[]) =>
      catalog.wakeTrash.executeWithOptions(said(`wake the runs waiting on table ${tableId}`), [
        { tableId, ...(states ? { states } : {}), ...scope },
      ]),
    requestEviction: () => catalog.requestEviction.executeWithOptions(said('ask the trash space cap to look again'), [scope]),
  };
}

export type CatalogCalls = ReturnType<typeof catalogCalls>;
