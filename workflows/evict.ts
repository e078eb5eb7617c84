import { formatTableName } from '../domain/names';
import { continueAsNew, executeChild, log, setCurrentDetails, setHandler, workflowInfo } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { OPERATIONS, type EvictInput } from '../domain/operations';
import { type PurgeInput } from '../domain/operation-inputs';
import { evictSignal } from '../domain/contracts';
import { spaceCaps, type SettingRow } from '../domain/settings';
import type { TableInfo } from '../domain/table';
import type { TrashPage } from '../activities';
import { catalogCalls, type CatalogCalls } from './catalog-calls';
import { measureSizes } from './measure';
import type { purgeTable } from './purge';

/** What one look at the trash found and did, per cap. */
export interface EvictionPass {
  scope: string;
  maxBytes: number;
  bytesBefore: number;
  bytesAfter: number;
  purged: number[];
  /** Tables the cap would have purged next, but are held. */
  held: number[];
  /** Tables whose size no node gave (counted as 0), or whose purge did not happen (recalled, held, purged meanwhile). */
  skipped: number[];
}

/** Tables measured in one question to the nodes. */
const MEASURED_PER_CALL = 500;

/** Looks at the trash this many times at most in a run, then continues as new (each look is a handful of events). */
const PASSES_PER_RUN = 50;

/**
 * The trash's space cap (Accumulo's maxspace; Oracle's recycle bin under space pressure): while the bytes of the trashed
 * tables exceed trash.maxBytes, the oldest (by drop time) that are not held are purged, one at a time, each by a
 * `purge:<id>` run with the `policy` trigger (which purges only the table of that very trash, never a held one, and ends
 * its trash timer). Bytes are what the storage nodes measure. Each namespace with a cap of its own is capped alone;
 * the others together, by the global cap. Started by a drop that commits under a cap, or by a cap set; a signal while
 * it runs makes it look again once it is done.
 */
export async function evictTrash(input: EvictInput): Promise<EvictionPass[]> {
  let again = true;
  setHandler(evictSignal, () => {
    again = true;
  });
  const calls = catalogCalls(input.catalogId);
  const passes: EvictionPass[] = [];
  for (let looks = 0; again; looks++) {
    if (looks >= PASSES_PER_RUN || workflowInfo().continueAsNewSuggested) await continueAsNew<typeof evictTrash>(input);
    again = false;
    const { settings, tables } = await readTrash(calls);
    const capped = spaceCaps(
      settings,
      tables.map((t) => t.namespace),
    ).filter((cap): cap is typeof cap & { maxBytes: number } => cap.maxBytes !== null);
    for (const cap of capped) {
      const inCap = tables.filter((t) => cap.namespaces.includes(t.namespace));
      passes.push(await evictUnder(cap, inCap, input));
    }
  }
  setCurrentDetails('');
  return passes;
}

type Trashed = TrashPage['tables'][number];

/** The settings, and every trashed table, read a page at a time. */
async function readTrash(calls: CatalogCalls): Promise<{ settings: SettingRow[]; tables: Trashed[] }> {
  const tables: Trashed[] = [];
  for (let afterId = 0; ;) {
    const page = await calls.trashPage(afterId);
    tables.push(...page.tables);
    if (page.lastId === null) return { settings: page.settings, tables };
    afterId = page.lastId;
  }
}

/** Purges the oldest of `tables` (not held) until their bytes fit `cap.maxBytes`. */
async function evictUnder(cap: { scope: string; maxBytes: number }, tables: Trashed[], input: EvictInput): Promise<EvictionPass> {
  const sizes = new Map<number, number | null>();
  // A few hundred tables a question, as the client asks them: a whole trash's placements would pass the payload limit.
  for (let from = 0; from < tables.length; from += MEASURED_PER_CALL) {
    const chunk = tables.slice(from, from + MEASURED_PER_CALL).map((t) => ({ id: t.id, placement: t.placement }));
    for (const size of await measureSizes(input.catalogId, chunk)) sizes.set(size.id, size.bytes);
  }
  const pass: EvictionPass = { scope: cap.scope, maxBytes: cap.maxBytes, bytesBefore: 0, bytesAfter: 0, purged: [], held: [], skipped: [] };
  for (const t of tables) {
    const bytes = sizes.get(t.id);
    if (bytes === null || bytes === undefined) pass.skipped.push(t.id);
    else pass.bytesBefore += bytes;
  }
  let bytes = pass.bytesBefore;
  const oldestFirst = [...tables].sort((a, b) => a.droppedAt - b.droppedAt || a.id - b.id);
  for (const table of oldestFirst) {
    if (bytes <= cap.maxBytes) break;
    if (table.held) {
      pass.held.push(table.id);
      continue;
    }
    const size = sizes.get(table.id) ?? null;
    if (size === null) continue;
    setCurrentDetails(`${cap.scope}: ${bytes} bytes in the trash, over ${cap.maxBytes}: purging table ${table.id} (${size} bytes)`);
    if (await purgeForSpace(table, input)) {
      pass.purged.push(table.id);
      bytes -= size;
    } else {
      pass.skipped.push(table.id);
    }
  }
  pass.bytesAfter = bytes;
  if (bytes > cap.maxBytes) log.warn('the trash is still over its space cap: what is left is held or could not be purged', { ...pass });
  else if (pass.purged.length > 0) log.info('purged the oldest trashed tables to fit the space cap', { ...pass });
  return pass;
}

/** One table purged for space by a `purge:<id>` run; false if it was not (held or recalled meanwhile, a purge running, a failure). */
async function purgeForSpace(table: Trashed, input: EvictInput): Promise<boolean> {
  const record = OPERATIONS.purge;
  const purge: PurgeInput = { tableId: table.id, trigger: 'policy', droppedAt: table.droppedAt, catalogId: input.catalogId };
  try {
    const purged: TableInfo = await executeChild<typeof purgeTable>(record.workflowType, {
      workflowId: record.workflowId(table.id, input.catalogId),
      args: [purge],
      typedSearchAttributes: record.searchAttributes({ tableId: table.id, namespace: table.namespace, name: table.name }),
      staticSummary: `purge table ${table.id} (${formatTableName(table)}): the trash is over its space cap`,
    });
    return purged.state === 'PURGED';
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError))
      log.warn('a purge for space failed', { tableId: table.id, error: String(err) });
    return false;
  }
}
