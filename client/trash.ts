import { randomUUID } from 'node:crypto';
import { keepsRealTables } from '../domain/deployment';
import { InvalidInputError, TableFateError, TableNotFoundError, WrongStateError } from '../domain/errors';
import { retentionUpdate } from '../domain/contracts';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS, MAX_TABLES_DROPPED_TOGETHER } from '../domain/limits';
import { formatTableName, quotePart, type TableName } from '../domain/names';
import { OPERATIONS, PLAN_DROP, PLAN_DROP_TIMEOUT_MS } from '../domain/operations';
import { isNotTrashedYet, notTrashed, onHold, tableNotFound } from '../domain/refusals';
import {
  OPERATION_REQUESTS,
  parseRequest,
  retentionRequestSchema,
  type PurgeRequest,
  type RetentionRequest,
  type TrashRequest,
} from '../domain/requests';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import type { adoptTrashTable, planDrop, purgeTable, trashExpiry, trashTable } from '../workflows';
import { callTimeout, describeCheck, type ClientContext } from './context';
import { applicationFailureOf, isRunNotFound } from './errors';
import { checkForDriver, liveTable, trashedTable } from './names';
import type { WriteOptions } from './options';
import { onTable, startAndWait } from './start';
import { temporalCommon } from './temporal';
import { repeatable, type CallRecord, type ExecuteOptions } from './calls';

/** The trash: a table moved to it (trash), deleted for good (purge), kept longer or shorter (retention); a recall: recall.ts. */

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A drop's own settings. */
interface DropSettings {
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  cascade?: boolean;
}

/**
 * A trash's plan: the name asked for, the table that bore it when asked, and the drop's own settings; or, for a table
 * tablefate does not keep yet on the node named (PostgreSQL), the node whose table is adopted and dropped in one run.
 */
type TrashPlan = DropSettings & { name: TableName } & (
    { table: TableRecord; together?: TableName[]; namespace?: string } | { adopt: { node: string } }
  );

export const trashCall: CallRecord<TrashRequest, TrashPlan, TableInfo> = {
  async plan(ctx, request) {
    const {
      table: name,
      namespace,
      together,
      retentionSeconds,
      drainTimeoutSeconds,
      cascade,
      node,
      dryRun,
    } = parseRequest(OPERATION_REQUESTS.trash, request);
    if (cascade && !keepsRealTables(ctx.storageDriver)) {
      throw new InvalidInputError(
        'cascade is for the postgres and mariadb storage drivers: a table kept as files has nothing that depends on it',
      );
    }
    const settings = { retentionSeconds, drainTimeoutSeconds, ...(cascade ? { cascade } : {}) };
    if (namespace !== undefined) return { plan: await namespacePlan(ctx, namespace, settings) };
    if (!name) throw new InvalidInputError('give a table, or a whole namespace, to drop');
    if (together) {
      if (node !== undefined) throw new InvalidInputError('a drop of several tables drops tables tablefate keeps: adopt each first');
      if (dryRun) throw new InvalidInputError("a dry run is of one table's drop: ask it of each table");
      const tables = await droppedAsOne(ctx, [name, ...together]);
      return { plan: { name, table: tables[0]!, together, ...settings } };
    }
    if (node !== undefined) {
      if (!keepsRealTables(ctx.storageDriver)) {
        throw new InvalidInputError('a drop names a node only with the postgres and mariadb storage drivers, to adopt the table it drops');
      }
      const found = await ctx.catalog.findByName(name);
      // Not kept yet, or an adopt of it that failed or stopped half way (the run resumes that record).
      if (!found || ((found.state === 'CREATE_FAILED' || found.state === 'CREATING') && found.params.adopt !== undefined)) {
        checkForDriver(ctx.storageDriver, { table: name, shards: 1 });
        if (dryRun) {
          throw new InvalidInputError(
            `${formatTableName(name)} is not a table tablefate keeps: a dry run is of a kept table's drop, not of an adopt and drop (adopt it first)`,
          );
        }
        return { plan: { name, adopt: { node }, ...settings } };
      }
    }
    const table = await liveTable(ctx.catalog, name);
    if (dryRun) {
      checkDroppable(table, name);
      return { done: await dryRunOf(ctx, table, cascade === true) };
    }
    return { plan: { name, table, ...settings } };
  },
  execute: (ctx, plan, opts) => ('adopt' in plan ? adoptAndTrash(ctx, plan, opts) : trash(ctx, plan, opts)),
};

/** The timeout of a call that drains: unless said otherwise, long enough for its drain (leases, PostgreSQL sessions) and a little more. */
export function drainingTimeout(ctx: ClientContext, { drainTimeoutSeconds }: { drainTimeoutSeconds?: number }, opts: WriteOptions): number {
  // (So that a drain is not mistaken for a server that does not answer.)
  const drainMs = (drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;
  return opts.timeoutMs === undefined && !ctx.defaultTimeoutGiven
    ? Math.max(ctx.defaultTimeoutMs, drainMs + 30_000)
    : callTimeout(ctx, opts);
}

/** A table tablefate does not keep yet, adopted and dropped in one run (workflows/adopt-trash.ts). */
async function adoptAndTrash(
  ctx: ClientContext,
  plan: TrashPlan & { adopt: { node: string } },
  opts: WriteOptions & ExecuteOptions,
): Promise<TableInfo> {
  const { name, adopt, retentionSeconds, drainTimeoutSeconds, cascade } = plan;
  const label = formatTableName(name);
  const record = OPERATIONS.adoptTrash;
  const trashed = await startAndWait<typeof adoptTrashTable>(ctx, {
    workflowId: record.workflowId(name, ctx.catalog.id),
    what: `adopt and drop of ${label}`,
    check: describeCheck(label),
    timeoutMs: drainingTimeout(ctx, plan, opts),
    ...repeatable(opts),
    onDetails: opts.onDetails,
    run: {
      record,
      input: { ...name, adopt, retentionSeconds, drainTimeoutSeconds, ...(cascade ? { cascade } : {}), expiryRetry: ctx.expiryRetry },
      target: name,
      summary: `adopt and drop ${label} (on ${adopt.node})`,
    },
  });
  // Another request adopted the table first: this one joined a record that is kept, and dropped nothing.
  if (trashed.state === 'READY') throw new WrongStateError(`table ${label} was adopted meanwhile (id ${trashed.id}): drop it again`);
  return trashed;
}

async function trash(
  ctx: ClientContext,
  plan: TrashPlan & { table: TableRecord; together?: TableName[]; namespace?: string },
  opts: WriteOptions & ExecuteOptions,
): Promise<TableInfo> {
  const { name, retentionSeconds, drainTimeoutSeconds, cascade, together, namespace } = plan;
  const timeoutMs = drainingTimeout(ctx, plan, opts);
  const label = formatTableName(name);
  let table = plan.table;
  // A drop of several tables runs under its lowest id (its first lock): asked in any order, it is the same run.
  let group: Array<{ table: TableRecord; name: TableName }> = [];
  const record = OPERATIONS.trash;
  // Times this call met a drop without cascade of the same id running, and started again after it (a bound).
  let joinedPlain = 0;
  // The run whose answer this call takes (started, or joined), where the server said which.
  let answeredBy: string | undefined;
  const trashed = await startAndWait<typeof trashTable, TableInfo>(ctx, {
    ...onTable(ctx, record, table.id, `trash of ${label} (id ${table.id})`, timeoutMs, opts),
    run: async (attempt) => {
      if (together) {
        const tables = await droppedAsOne(ctx, [name, ...together]);
        group = tables.map((t, i) => ({ table: t, name: i === 0 ? name : together[i - 1]! })).sort((a, b) => a.table.id - b.table.id);
        table = tables[0]!;
      } else if (attempt > 0) table = await liveTable(ctx.catalog, name);
      checkDroppable(table, name);
      const lead = group[0] ?? { table, name };
      const others = group.slice(1).map((member) => ({ tableId: member.table.id, expectedName: member.name }));
      return {
        record,
        workflowId: record.workflowId(lead.table.id, ctx.catalog.id),
        input: {
          tableId: lead.table.id,
          retentionSeconds,
          drainTimeoutSeconds,
          ...(cascade ? { cascade } : {}),
          ...(others.length > 0 ? { together: others } : {}),
          ...(namespace !== undefined ? { wholeNamespace: namespace } : {}),
          expectedName: lead.name,
          expiryRetry: ctx.expiryRetry,
        },
        target: { tableId: lead.table.id, ...lead.name },
        summary:
          others.length > 0
            ? `trash ${group.map((member) => `${formatTableName(member.name)} (id ${member.table.id})`).join(', ')} as one`
            : `trash ${label} (id ${table.id})`,
      };
    },
    again: async (outcome) => {
      answeredBy = outcome.runId;
      // Joined a drop of the table without cascade (the run that answered did not ask it), refused for what cascade
      // takes: once it has closed, this one starts again, and runs, or joins the drop running then.
      if ('error' in outcome && cascade && isHasDependents(outcome.error)) {
        if (joinedPlain >= MAX_PLAIN_JOINED || (await askedCascade(ctx, record.workflowId(table.id, ctx.catalog.id), outcome.runId)))
          return false;
        joinedPlain++;
        return true;
      }
      if (!('answer' in outcome) || isTrashSince(outcome.answer, table)) return false;
      // The drop this call joined had trashed the table before the state this call read (it is READY again: a recall
      // came between), and answered only now: its workflow task that committed was lost, and its repeat answered every
      // caller waiting. That is the recalled trash's answer, not this call's: once that run has closed, start a fresh one.
      await pause(200);
      return true;
    },
  });
  // Joined a trash of this table that was already running: its retention is the one that holds.
  const kept = (Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)) / 1000;
  if (trashed.state === 'TRASHED' && retentionSeconds !== undefined && kept !== retentionSeconds) {
    throw new WrongStateError(`table ${label} was trashed meanwhile by another request, with a retention of ${kept} s`);
  }
  // What the run that answered was asked, read of its start only when the answer leaves it open.
  let answeredAsk: Promise<AskedOfRun | undefined> | undefined;
  const answeredRun = () => (answeredAsk ??= askedOfRun(ctx, record.workflowId(trashed.id, ctx.catalog.id), answeredBy));
  // And its tables: a drop of one must not pass for a drop of several, nor the other way round.
  const others = group.slice(1).map((member) => member.table.id);
  const withThose = trashed.droppedWith ?? [];
  if (withThose.length !== others.length || others.some((id) => !withThose.includes(id))) {
    throw new WrongStateError(
      `table ${formatTableName(trashed)} (id ${trashed.id}) was trashed meanwhile by another request, ` +
        (withThose.length > 0 ? `with tables ${withThose.join(', ')}` : 'alone'),
    );
  }
  // And its namespace: a drop of a whole namespace must not pass for one of its tables that left the schema behind, nor
  // the other way round. (Taking a schema along, a run says so in its notes: one without notes took none.)
  const answered = namespace !== undefined || (trashed.notes ?? []).length > 0 ? await answeredRun() : undefined;
  if (namespace !== undefined && answered && answered.wholeNamespace !== namespace) {
    throw new WrongStateError(
      `table ${formatTableName(trashed)} (id ${trashed.id}) was trashed meanwhile by another request, alone: ` +
        `namespace ${quotePart(namespace)} stays, with what else it holds`,
    );
  }
  if (namespace === undefined && answered?.wholeNamespace !== undefined) {
    throw new WrongStateError(
      `table ${label} was trashed meanwhile by another request, with its whole namespace ${quotePart(answered.wholeNamespace)}: ` +
        (trashed.notes ?? []).join('; '),
    );
  }
  // And its cascade: a drop asked without it must not pass for one that took the table's family along.
  if (!cascade && trashed.family && (await answeredRun())?.cascade === true) {
    throw new WrongStateError(`table ${label} was trashed meanwhile by another request, with cascade: ${trashed.family.join('; ')}`);
  }
  // (The answer is of the table asked first, with what the run's moves said of them all.)
  if (trashed.id === plan.table.id) return trashed;
  const asked = await ctx.catalog.getTable(plan.table.id);
  if (!asked) return trashed;
  // (Purged at its expiry before this answer came, a short retention: the drop left it TRASHED, and that is its answer.
  // Purged before its expiry, it was the drop's own purge, the trash being off where it lives, or one by hand.)
  const expiredSince =
    asked.state === 'PURGED' &&
    asked.droppedAt !== null &&
    toTableInfo(asked).droppedAt === trashed.droppedAt &&
    asked.purgedAt !== null &&
    asked.purgedAt >= asked.expireAt!;
  const left = expiredSince ? { ...asked, state: 'TRASHED' as const, purgedAt: null } : asked;
  return { ...toTableInfo(left), ...(trashed.notes ? { notes: trashed.notes } : {}) };
}

/**
 * A whole namespace's drop: every table tablefate keeps in it, dropped as one, with their views (PostgreSQL: cascade; the
 * schema goes too, with what else it holds). None is TableNotFound; one that is not live refuses it, named.
 */
async function namespacePlan(ctx: ClientContext, namespace: string, settings: DropSettings): Promise<TrashPlan> {
  const tables = (await ctx.catalog.listTables({ includeTrashed: false })).filter((t) => t.namespace === namespace);
  if (tables.length === 0) throw new TableNotFoundError(`namespace ${quotePart(namespace)} holds no live table tablefate keeps`);
  if (tables.length > MAX_TABLES_DROPPED_TOGETHER) {
    throw new InvalidInputError(
      `namespace ${quotePart(namespace)} holds ${tables.length} tables: a drop takes at most ${MAX_TABLES_DROPPED_TOGETHER} as one`,
    );
  }
  for (const table of tables) checkDroppable(table, table);
  const [first, ...rest] = tables.map((t): TableName => ({ namespace: t.namespace, name: t.name }));
  return {
    ...settings,
    ...(keepsRealTables(ctx.storageDriver) ? { cascade: true } : {}),
    name: first!,
    table: tables[0]!,
    ...(rest.length > 0 ? { together: rest } : {}),
    namespace,
  };
}

/** The live tables named, for a drop of them as one: each once, each droppable. */
async function droppedAsOne(ctx: ClientContext, names: readonly TableName[]): Promise<TableRecord[]> {
  const tables: TableRecord[] = [];
  for (const name of names) {
    const table = await liveTable(ctx.catalog, name);
    checkDroppable(table, name);
    const twice = tables.find((t) => t.id === table.id);
    if (twice) throw new InvalidInputError(`table ${formatTableName(name)} (id ${table.id}) is named twice in one drop`);
    tables.push(table);
  }
  return tables;
}

/** How many drops without cascade a drop with it starts again after (each one it met running refused it). */
export const MAX_PLAIN_JOINED = 3;

/** What a drop (or truncate) run was asked beyond its table, as its start says. */
interface AskedOfRun {
  cascade?: boolean;
  wholeNamespace?: string;
}

/**
 * What the drop (or truncate) run at `workflowId` (`runId`: that run; else its latest) was asked; when its history cannot
 * be read, nothing, and the answer passes as it did before these checks.
 */
async function askedOfRun(ctx: ClientContext, workflowId: string, runId: string | undefined): Promise<AskedOfRun | undefined> {
  try {
    const history = await ctx.client.workflow.getHandle(workflowId, runId).fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    return payload ? temporalCommon().defaultPayloadConverter.fromPayload<AskedOfRun>(payload) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the drop (or truncate) run at `workflowId` (`runId`: that run; else its latest) was asked for cascade. */
export const askedCascade = async (ctx: ClientContext, workflowId: string, runId: string | undefined): Promise<boolean> =>
  (await askedOfRun(ctx, workflowId, runId))?.cascade === true;

export const isHasDependents = (err: unknown) =>
  (err instanceof TableFateError ? err.type : applicationFailureOf(err)?.type) === 'HasDependents';

/** Refuses a table a drop cannot start on. DRAINING, TRASHING: an earlier drop stopped half way, which a drop resumes. */
function checkDroppable(table: TableRecord, name: TableName): void {
  if (table.state !== 'READY' && table.state !== 'DRAINING' && table.state !== 'TRASHING') {
    throw new WrongStateError(`table ${formatTableName(name)} (id ${table.id}) is ${table.state}`);
  }
}

/**
 * A drop's dry run (`dryRun`): the table as it is now, with `notes` saying what a drop with the same `cascade` would take
 * into the trash with it and detach, or that it would move its shards alone, each node asked through a worker
 * (workflows/plan-drop.ts: the nodes' drivers sort what depends on the table by the drop's own rules). A drop that would
 * be refused (HasDependents, ShardMissing) is refused the same. It starts no drop and takes no lock: a read.
 */
async function dryRunOf(ctx: ClientContext, table: TableRecord, cascade: boolean): Promise<TableInfo> {
  const label = `${formatTableName(table)} (id ${table.id})`;
  const workflowId = PLAN_DROP.workflowId(randomUUID(), ctx.catalog.id);
  const notes = await startAndWait<typeof planDrop>(ctx, {
    workflowId,
    what: `dry run of the drop of ${label}`,
    check: `the workflow ${workflowId} in the web UI`,
    timeoutMs: PLAN_DROP_TIMEOUT_MS,
    run: {
      record: PLAN_DROP,
      input: { tableId: table.id, placement: table.placement, ...(cascade ? { cascade } : {}) },
      target: {},
      summary: `dry run of the drop of ${label} (reads only)`,
    },
  });
  return { ...toTableInfo(table), notes };
}

/**
 * Whether a trash's answer is of a trash made after `read`, the table as the call found it before it started or
 * joined the run: every state change is stamped with its workflow's time, and a trash commits after the READY (or
 * TRASHING) it starts from. An answer dropped before that READY was stamped is of an earlier trash, which a recall
 * has undone since.
 */
function isTrashSince(answer: TableInfo, read: TableRecord): boolean {
  return answer.droppedAt === null || Date.parse(answer.droppedAt) >= read.updatedAt;
}

/** A purge's plan: the trashed table, as found. */
interface PurgePlan {
  tableId: number;
  target: TableName;
}

export const purgeCall: CallRecord<PurgeRequest, PurgePlan, TableInfo> = {
  async plan(ctx, request) {
    const { tableId } = parseRequest(OPERATION_REQUESTS.purge, request);
    const table = await ctx.catalog.getTable(tableId);
    if (!table) throw tableNotFound(tableId);
    // (Checked again under the lock by the workflow; here, to refuse at once what must not be purged.)
    if (table.state === 'TRASHED' && table.hold) throw onHold({ ...table, hold: table.hold });
    return { plan: { tableId, target: { namespace: table.namespace, name: table.name } } };
  },
  async execute(ctx, { tableId, target }, opts) {
    const record = OPERATIONS.purge;
    const purged = await startAndWait<typeof purgeTable>(ctx, {
      ...onTable(ctx, record, tableId, `purge of table ${tableId}`, callTimeout(ctx, opts), opts),
      run: { record, input: { tableId, trigger: 'manual' }, target: { tableId, ...target }, summary: `purge table ${tableId}` },
    });
    // Joined a purge started by the trash timer that found the table restored: nothing was purged.
    if (purged.state !== 'PURGED') throw notTrashed({ id: tableId, state: purged.state }, 'can be purged');
    return purged;
  },
};

/**
 * A retention change starts no run: it is an update to the table's expiry run, which moves its own timer. It has a
 * write's deadline and typed errors all the same (WriteRunner).
 */
/** A retention change's plan: the trashed table, and its new retention. */
interface RetentionPlan {
  tableId: number;
  retentionSeconds: number;
}

export const retentionCall: CallRecord<RetentionRequest, RetentionPlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref, retentionSeconds } = parseRequest(retentionRequestSchema, request);
    const table = await trashedTable(ctx.catalog, ref);
    if (table.state !== 'TRASHED') throw notTrashed(table, 'has a retention to change');
    return { plan: { tableId: table.id, retentionSeconds } };
  },
  // (The same retention again changes nothing: a repeated execute needs no request id.)
  execute: (ctx, plan, opts) => setRetention(ctx, plan, opts),
};

async function setRetention(ctx: ClientContext, { tableId, retentionSeconds }: RetentionPlan, opts: WriteOptions): Promise<TableInfo> {
  const timeoutMs = callTimeout(ctx, opts);
  const workflowId = OPERATIONS.expiry.workflowId(tableId, ctx.catalog.id);
  const op = { workflowId, what: `retention change of table ${tableId}`, check: describeCheck(tableId) };
  return ctx.writes.run(op, timeoutMs, async (started, signal) => {
    started();
    const run = ctx.client.workflow.getHandle<typeof trashExpiry>(workflowId);
    try {
      for (;;) {
        try {
          return await run.executeUpdate(retentionUpdate, { args: [retentionSeconds] });
        } catch (err) {
          // A trash run of v19 that does not know its drop time yet (its committing task lost and being repeated)
          // refuses the change: ask again shortly; the call's deadline bounds it. (An expiry's run waits instead.)
          if (!isNotTrashedYet(applicationFailureOf(err)?.message ?? '') || signal.aborted) throw err;
          await pause(500);
        }
      }
    } catch (err) {
      if (isRunNotFound(err)) {
        throw new WrongStateError(
          `the expiry run of table ${tableId} (${workflowId}) is not running; the reconciler re-arms it within a minute: try again then`,
        );
      }
      throw err;
    }
  });
}
