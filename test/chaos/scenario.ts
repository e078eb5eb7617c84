import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Catalog } from '../../catalog/catalog';
import type { LeaseInfo } from '../../domain/leases';
import type { TableRecord } from '../../domain/table';
import type { Random } from './random';
import type { StorageDriverName } from '../../domain/deployment';
import type { NodeDatabase } from './rows';
import { SqlCaller } from './sql-caller';
import { NAMESPACE_NAMES, NAMESPACES } from './namespaces';
import { CallerClient, CommandLineCaller, type Caller } from './callers';
import { requestedId, requestedName, type OpKind, type OpRecord, type OpRequest, type RetentionAim } from './ops';

/**
 * The load: several SDK clients, each in its own loop, issuing mixed operations on a small pool of names
 * (so that names are reused and operations contend), and recording every answer they get. Beside a table's life
 * (create, trash, undelete, purge) the mix has the trash's policies (issue 17): legal holds placed and released on
 * live and trashed tables, retention changes of trashed tables (into the past, a few seconds on, or past the run),
 * and short leases (1 to 5 s), some released, some renewed, some left to expire, often followed at once by a drop of
 * their table with a short drain timeout (TableBusy is then a fair answer). Truncates into the trash (issue 43) aim at
 * live tables, by id or by name, now and then right after a lease too, so that they drain it as a drop does.
 */

export interface ScenarioOptions {
  rng: Random;
  ops: number;
  clients: number;
  /** Where the clients connect: the same TABLEFATE_HOME (and catalog url, if any) and server as the worker. */
  config: {
    home: string;
    catalogUrl?: string;
    temporalAddress: string;
    temporalNamespace: string;
    /** The deployment's storage driver (files when absent) and, for postgres, its nodes' urls: what a create may ask for. */
    storageDriver?: StorageDriverName;
    storageUrls?: readonly string[];
  };
  /** With the postgres driver, the column definitions every create asks for (always the same: a retry is the same create). */
  columns?: string;
  /**
   * Names a user's own table holds on some nodes (postgres driver): now and then a create, and a recall's new name,
   * aims at one. Few shots, since a create refused there is resumed with the same id, so the same node, next time.
   */
  userNames?: readonly string[];
  /** Read to pick targets among the tables that exist. */
  catalog: Catalog;
  /**
   * Units (units.ts): the names a drop of `table` should take along as one (tables keyed to it), and names to aim drops
   * and recalls at more often (partitions adopted alone). Absent: drops together draw their companions at random only.
   */
  units?: UnitHints;
  /**
   * Whether a READY table has nothing of the run's that a truncate refuses (postgres: a materialized view, another table's
   * key to it, a partition): truncates aim at such tables mostly, the others being refused, nothing changed
   * (HasDependents, as PostgreSQL refuses TRUNCATE of a table a key references; InvalidInput). Absent: every table is.
   */
  truncatable?: (table: TableRecord) => boolean;
  /** False: no truncate is drawn, neither alone nor after a lease or a create (the mariadb driver refuses them). */
  truncates?: boolean;
  callTimeoutMs: number;
  /**
   * Absent: SDK clients. `cli`: each call is a `tablefate` command run from `cwd` (a directory with nothing in it) with
   * an empty TABLEFATE_HOME and only the server's address and the catalog's URL, as on another host. `sql` (postgres
   * driver): the door's calls through the SQL door of the table's node, each node reached at `nodes`' url (as the
   * caller's role), the others through the SDK (sql-caller.ts); never a drop of one of `userTables` (`<node> <schema>.<table>`).
   */
  caller?: { kind: 'cli'; cwd: string } | { kind: 'sql'; nodes: readonly NodeDatabase[]; userTables: readonly string[] };
  /** No operation starts after this time (epoch ms): a stalled product must not stall the run. */
  deadline: number;
  signal: AbortSignal;
  onOpStarted: (request: OpRequest) => void;
  /** Called with every answered operation before the client goes on (to fingerprint a new table's files). */
  onAnswer: (record: OpRecord) => Promise<void>;
  onProgress: (done: number) => void;
  /**
   * Given, the clients are closed when the run calls what it is handed (at its end), not when the operations are over:
   * a call given up may still have a gRPC retry waiting on a timer, which throws from that timer once its connection is
   * closed (a slow run's calls, given up on a worker that does not come, do).
   */
  deferClose?: (close: () => Promise<void>) => void;
}

/** What units.ts tells the scenario about the tables it keys to each other and the partitions it adopted. */
export interface UnitHints {
  /** The names keyed to `table` (either way) by a key the run made, live now: a drop together takes them along. */
  keyedTo(table: TableRecord): string[];
  /** The adopted partitions: a drop aims at one of them now and then. */
  partitions(): string[];
}

/** How often a drop takes other tables along as one (2 to 4 tables in all); always when the table is keyed to others. */
const TOGETHER_CHANCE = 0.3;
/** How often a drop aims at an adopted partition (postgres), when there is one READY. */
const PARTITION_CHANCE = 0.2;
/** How often a recall of a table dropped with others asks for it alone. */
const ALONE_CHANCE = 0.35;
/** How often a drop takes a whole namespace (one of NAMESPACES with a live table), and a recall of one asks for another. */
const NAMESPACE_DROP_CHANCE = 0.25;
const NEW_NAMESPACE_CHANCE = 0.3;
/** With SDK clients, how often a whole namespace's drop goes by the command line (`tablefate drop --namespace`). */
const CLI_NAMESPACE_CHANCE = 0.4;

/** The pool of names, each with the shard count its creates usually ask for (files driver). */
const FILES_NAMES: ReadonlyArray<readonly [string, number]> = [
  ['chaos.orders', 2],
  ['chaos.users', 1],
  ['chaos.events', 3],
  ['chaos.carts', 2],
  ['chaos.items', 1],
  ['chaos.logs', 3],
  ...NAMESPACE_NAMES,
];

/**
 * The same names with the postgres driver, where a table is one real table unless more shards are asked for; two
 * names of several, whose shard tables are `<name>_<k>` (a user's table holds `chaos.logs_1` on one node).
 */
const POSTGRES_NAMES: ReadonlyArray<readonly [string, number]> = [
  ['chaos.orders', 1],
  ['chaos.users', 1],
  ['chaos.events', 2],
  ['chaos.carts', 1],
  ['chaos.items', 1],
  ['chaos.logs', 3],
  ...NAMESPACE_NAMES,
];

/** How often a create or a recall's new name aims at a name a user's table holds. */
const USER_NAME_CHANCE = 0.1;

/** A table's life first (about three calls in four), then the trash's policies. */
const OP_WEIGHTS: Readonly<Record<OpKind, number>> = {
  create: 30,
  trash: 26,
  // A little less than a drop: each one leaves a trash entry beside its table, and the pool of names is small.
  truncate: 18,
  undelete: 16,
  purge: 12,
  hold: 7,
  release: 6,
  retention: 7,
  lease: 10,
  renewLease: 3,
  releaseLease: 3,
};
/** The same without truncates, for a driver that refuses them (mariadb). */
const OP_WEIGHTS_WITHOUT_TRUNCATE: Readonly<Record<OpKind, number>> = { ...OP_WEIGHTS, truncate: 0 };

/** Short retentions expire during and right after the run; long ones outlive it (and must keep their timers). */
const SHORT_RETENTION_S: readonly [number, number] = [2, 6];
const LONG_RETENTION_S = 3600;

/**
 * The reasons a hold gives: two, so that a hold of a table held for the other one is refused (WrongState), and one
 * for the same one answers the table as it is.
 */
const HOLD_REASONS: readonly string[] = ['chaos legal hold, case 17', 'chaos audit 2026-12'];

/** Leases live 1 to 5 s: they end during the run, released, or expired. */
const LEASE_TTL_S: readonly [number, number] = [1, 5];
/** A drop that names a drain timeout waits this long at most for the leases (else the default, 60 s). */
const DRAIN_TIMEOUT_S: readonly [number, number] = [1, 4];
/** How often a drop names a short drain timeout of its own. */
const SHORT_DRAIN_CHANCE = 0.3;
/**
 * With the postgres driver, how often a drop asks for `cascade`: the run gives tables views and keys (families.ts), and
 * a drop without it of a table that has some is refused HasDependents, nothing changed.
 */
const CASCADE_CHANCE = 0.8;
/**
 * Right after a lease is taken, how often its client drops the table at once (it waits in DRAINING) or truncates it (it
 * waits in TRUNCATING), releases the lease, or renews it; otherwise the lease is left to expire (or to another client's
 * renewal or release).
 */
const AFTER_LEASE: Readonly<Record<'drop' | 'truncate' | 'release' | 'renew' | 'nothing', number>> = {
  drop: 45,
  truncate: 20,
  release: 10,
  renew: 10,
  nothing: 15,
};
const AFTER_LEASE_WITHOUT_TRUNCATE: Readonly<Record<keyof typeof AFTER_LEASE, number>> = { ...AFTER_LEASE, truncate: 0 };
/** How often a truncate names its table by name rather than by id. */
const TRUNCATE_BY_NAME_CHANCE = 0.3;
/**
 * How often a truncate keeps its rows past the run: those entries are still in the trash at rest, where the checker
 * recalls them and reads their rows; the others expire during the run, checked right after their answer.
 */
const TRUNCATE_LONG_RETENTION_CHANCE = 0.4;
/** How often a truncate aims at a table with nothing depending on it (when there is one), rather than at any READY one. */
const TRUNCATABLE_CHANCE = 0.85;
/**
 * How often a client truncates the table its create was just answered with: on PostgreSQL nodes the user gives most
 * tables a key or a materialized view within seconds (which refuse a truncate), and often right after the create, so
 * that such a truncate meets one being made.
 */
const TRUNCATE_AFTER_CREATE_CHANCE = 0.2;

const nameOf = (t: { namespace: string; name: string }) => `${t.namespace}.${t.name}`;

/** What the clients share: the leases they were answered (to renew or release, even once expired). */
interface Shared {
  leases: LeaseInfo[];
}

/** A new retention for a trashed table, counted from its drop time: into the past, a few seconds on, or past the run. */
function retentionFor(rng: Random, target: TableRecord): { retentionSeconds: number; aim: RetentionAim } {
  const aim = rng.weighted<RetentionAim>({ past: 4, soon: 3, long: 3 });
  if (target.droppedAt === null) return { retentionSeconds: rng.int(...SHORT_RETENTION_S), aim };
  const elapsed = (Date.now() - target.droppedAt) / 1000;
  switch (aim) {
    case 'past':
      return { retentionSeconds: Math.max(1, Math.floor(elapsed) - rng.int(0, 2)), aim };
    case 'soon':
      return { retentionSeconds: Math.ceil(elapsed) + rng.int(3, 10), aim };
    case 'long':
      return { retentionSeconds: LONG_RETENTION_S + rng.int(0, 600), aim };
  }
}

/** Draws the next operation, aiming it at what the catalog holds now (with a few shots that must miss). */
async function pickOperation(
  rng: Random,
  catalog: Catalog,
  columns: string | undefined,
  userNames: readonly string[],
  holder: string,
  shared: Shared,
  units?: UnitHints,
  truncatable?: (table: TableRecord) => boolean,
  truncates = true,
): Promise<{ request: OpRequest; before: TableRecord | undefined }> {
  const names = columns === undefined ? FILES_NAMES : POSTGRES_NAMES;
  // Only tables of real PostgreSQL tables have families (the files driver refuses a cascade).
  const cascades = columns !== undefined;
  const aimsAtUser = () => userNames.length > 0 && rng.chance(USER_NAME_CHANCE);
  const tables = await catalog.listTables({ includeTrashed: true });
  const ready = tables.filter((t) => t.state === 'READY');
  const trashed = tables.filter((t) => t.state === 'TRASHED');
  const held = tables.filter((t) => t.hold !== null);
  const byName = async (table: string) => {
    const [namespace, name] = table.split('.') as [string, string];
    return catalog.findByName({ namespace, name });
  };
  /** `preferred` now and then missing on purpose (`miss`), any table then. */
  const aimAt = (preferred: readonly TableRecord[], miss: number) =>
    preferred.length > 0 && !rng.chance(miss) ? rng.pick(preferred) : rng.pick(tables);
  const leaseTo = async (kind: 'renewLease' | 'releaseLease') => {
    // Mostly a lease that is live now; sometimes one the run was answered, maybe expired or released already.
    const live = await catalog.listLeases({ now: Date.now() });
    const lease = live.length > 0 && !rng.chance(0.3) ? rng.pick(live) : rng.pick(shared.leases);
    const request: OpRequest = { kind, leaseId: lease.id, tableId: lease.tableId };
    return { request, before: await catalog.getTable(lease.tableId) };
  };

  let kind = rng.weighted(truncates ? OP_WEIGHTS : OP_WEIGHTS_WITHOUT_TRUNCATE);
  if (kind !== 'create' && kind !== 'trash' && tables.length === 0) kind = 'create';
  if ((kind === 'renewLease' || kind === 'releaseLease') && shared.leases.length === 0) kind = 'lease';
  switch (kind) {
    case 'create': {
      const [table, usual] = aimsAtUser() ? ([rng.pick(userNames), 1] as const) : rng.pick(names);
      // Now and then another shard count: a TableExists, or a table that later creates of the name will meet.
      const shards = rng.chance(0.1) ? rng.int(1, 4) : usual;
      const request: OpRequest = columns === undefined ? { kind, table, shards } : { kind, table, shards, columns };
      return { request, before: await byName(table) };
    }
    case 'trash': {
      const namespaces = NAMESPACES.filter((ns) => ready.some((t) => t.namespace === ns));
      if (namespaces.length > 0 && rng.chance(NAMESPACE_DROP_CHANCE)) {
        const namespace = rng.pick(namespaces);
        const first = ready.filter((t) => t.namespace === namespace).sort((a, b) => a.id - b.id)[0]!;
        const drop = trashOf(rng, nameOf(first), undefined, false);
        const request: OpRequest = { ...drop, namespace, ...(cascades ? { cascade: true } : {}) } as OpRequest;
        return { request, before: first };
      }
      const partitions = (units?.partitions() ?? []).filter((p) => ready.some((t) => nameOf(t) === p));
      const table =
        partitions.length > 0 && rng.chance(PARTITION_CHANCE)
          ? rng.pick(partitions)
          : ready.length > 0 && !rng.chance(0.1)
            ? nameOf(rng.pick(ready))
            : rng.pick(names)[0];
      const request = trashOf(rng, table, undefined, cascades);
      const before = await byName(table);
      // Keyed to others: all of them as one, mostly (alone, the parent is refused HasDependents without cascade).
      const keyed = before && units ? units.keyedTo(before).filter((n) => n !== table) : [];
      const together = new Set(keyed.length > 0 && !rng.chance(0.2) ? keyed : []);
      if (together.size > 0 || rng.chance(TOGETHER_CHANCE)) {
        const others = ready.map(nameOf).filter((n) => n !== table && !together.has(n));
        for (let k = rng.int(1, 3) - together.size; k > 0 && others.length > 0; k--) {
          together.add(others.splice(rng.int(0, others.length - 1), 1)[0]!);
        }
      }
      if (together.size > 0 && request.kind === 'trash') request.together = [...together].slice(0, 3);
      return { request, before };
    }
    case 'undelete': {
      const target = aimAt(trashed, 0.1);
      const newName = rng.chance(0.3) ? (aimsAtUser() ? rng.pick(userNames) : rng.pick(names)[0]) : undefined;
      // Dropped with others: alone now and then, and always under a new name (the others keep theirs).
      const unit = (target.droppedWith ?? []).length > 0;
      const alone = unit && (newName !== undefined || rng.chance(ALONE_CHANCE)) ? { alone: true } : {};
      // Of a namespace's: now and then into another of the run's namespaces (taken: NameTaken), with the others or alone.
      if (newName === undefined && NAMESPACES.includes(target.namespace) && rng.chance(NEW_NAMESPACE_CHANCE)) {
        const newNamespace = rng.pick(NAMESPACES.filter((ns) => ns !== target.namespace));
        return { request: { kind, tableId: target.id, newNamespace, ...alone }, before: await catalog.getTable(target.id) };
      }
      const request: OpRequest = newName ? { kind, tableId: target.id, newName, ...alone } : { kind, tableId: target.id, ...alone };
      return { request, before: await catalog.getTable(target.id) };
    }
    case 'truncate': {
      const free = truncatable ? ready.filter(truncatable) : ready;
      const target = aimAt(free.length > 0 && rng.chance(TRUNCATABLE_CHANCE) ? free : ready, 0.1);
      const request = truncateOf(rng, target, undefined);
      // By name, the table holding the name when the call is made (another than `target` if it is in the trash).
      return { request, before: 'table' in request ? await byName(request.table) : await catalog.getTable(target.id) };
    }
    case 'purge': {
      const target = aimAt(trashed, 0.2);
      return { request: { kind, tableId: target.id }, before: await catalog.getTable(target.id) };
    }
    case 'hold': {
      const target = aimAt([...ready, ...trashed], 0.1);
      return { request: { kind, tableId: target.id, reason: rng.pick(HOLD_REASONS) }, before: await catalog.getTable(target.id) };
    }
    case 'release': {
      const target = aimAt(held, 0.2);
      return { request: { kind, tableId: target.id }, before: await catalog.getTable(target.id) };
    }
    case 'retention': {
      const target = aimAt(trashed, 0.1);
      return { request: { kind, tableId: target.id, ...retentionFor(rng, target) }, before: await catalog.getTable(target.id) };
    }
    case 'lease': {
      const target = aimAt(ready, 0.1);
      const request: OpRequest = { kind, tableId: target.id, ttlSeconds: rng.int(...LEASE_TTL_S), holder };
      return { request, before: await catalog.getTable(target.id) };
    }
    case 'renewLease':
    case 'releaseLease':
      return leaseTo(kind);
  }
}

/**
 * A drop of `table`, with a short retention mostly, now and then a short drain timeout of its own, and (`cascades`) with
 * its family mostly.
 */
function trashOf(rng: Random, table: string, drainTimeoutSeconds: number | undefined, cascades: boolean): OpRequest {
  const retentionSeconds = rng.chance(0.8) ? rng.int(...SHORT_RETENTION_S) : LONG_RETENTION_S;
  const drain = drainTimeoutSeconds ?? (rng.chance(SHORT_DRAIN_CHANCE) ? rng.int(...DRAIN_TIMEOUT_S) : undefined);
  // (Drawn only when it may be asked: a files run draws what it always drew.)
  const cascade = cascades && rng.chance(CASCADE_CHANCE) ? { cascade: true } : {};
  return drain === undefined
    ? { kind: 'trash', table, retentionSeconds, ...cascade }
    : { kind: 'trash', table, retentionSeconds, drainTimeoutSeconds: drain, ...cascade };
}

/**
 * A truncate of `table`, by id or by name, with a short retention mostly (its entry expires during the run), and now and
 * then (always right after a lease: `drainTimeoutSeconds`) a short drain timeout of its own.
 */
function truncateOf(
  rng: Random,
  table: { id: number; namespace: string; name: string },
  drainTimeoutSeconds: number | undefined,
): OpRequest {
  const retentionSeconds = rng.chance(TRUNCATE_LONG_RETENTION_CHANCE) ? LONG_RETENTION_S : rng.int(...SHORT_RETENTION_S);
  const drain = drainTimeoutSeconds ?? (rng.chance(SHORT_DRAIN_CHANCE) ? rng.int(...DRAIN_TIMEOUT_S) : undefined);
  const target = rng.chance(TRUNCATE_BY_NAME_CHANCE) ? { table: nameOf(table) } : { tableId: table.id };
  return { kind: 'truncate', ...target, retentionSeconds, ...(drain === undefined ? {} : { drainTimeoutSeconds: drain }) };
}

/**
 * What a client does right after a lease was taken: often drop or truncate its table at once, with a short drain timeout
 * (the operation waits in DRAINING or TRUNCATING for the lease: it ends released, expired, or the operation is
 * TableBusy), or release or renew it.
 */
function followUpOfLease(
  rng: Random,
  lease: LeaseInfo,
  table: TableRecord | undefined,
  cascades: boolean,
  truncates: boolean,
): OpRequest | undefined {
  switch (rng.weighted(truncates ? AFTER_LEASE : AFTER_LEASE_WITHOUT_TRUNCATE)) {
    case 'drop':
      return table ? trashOf(rng, nameOf(table), rng.int(...DRAIN_TIMEOUT_S), cascades) : undefined;
    case 'truncate':
      return table ? truncateOf(rng, table, rng.int(...DRAIN_TIMEOUT_S)) : undefined;
    case 'release':
      return { kind: 'releaseLease', leaseId: lease.id, tableId: lease.tableId };
    case 'renew':
      return { kind: 'renewLease', leaseId: lease.id, tableId: lease.tableId };
    case 'nothing':
      return undefined;
  }
}

/** The table a planned request aims at, as the catalog holds it now. */
async function targetNow(catalog: Catalog, request: OpRequest): Promise<TableRecord | undefined> {
  const requested = requestedId(request);
  if (requested !== undefined) return catalog.getTable(requested);
  const table = requestedName(request);
  if (table === undefined) return undefined;
  const [namespace, name] = table.split('.') as [string, string];
  return catalog.findByName({ namespace, name });
}

export async function runScenario(opts: ScenarioOptions): Promise<OpRecord[]> {
  const records: OpRecord[] = [];
  let issued = 0;
  const clients: Caller[] = [];
  try {
    for (let i = 0; i < opts.clients; i++) {
      const caller = opts.caller;
      if (caller?.kind === 'cli') clients.push(new CommandLineCaller(opts.config, caller.cwd));
      else if (caller?.kind === 'sql') {
        const sdk = await CallerClient.open(opts.config);
        clients.push(new SqlCaller(sdk, caller.nodes, opts.rng.fork(`door-${i}`), `chaos sql caller ${i}`, caller.userTables));
      } else clients.push(await CallerClient.open(opts.config));
    }
  } catch (err) {
    await Promise.all(clients.map((client) => client.close()));
    throw err;
  }

  // SDK clients drop a whole namespace now and then by the command line too, as an operator would.
  const commandLine =
    opts.caller === undefined
      ? new CommandLineCaller(opts.config, await fs.promises.mkdtemp(path.join(path.dirname(opts.config.home), 'elsewhere-namespaces-')))
      : undefined;
  if (commandLine) clients.push(commandLine);
  const shared: Shared = { leases: [] };
  const lane = async (client: Caller, index: number) => {
    const rng = opts.rng.fork(`client-${index}`);
    const holder = `chaos-client-${index}@chaos`;
    /** What this client does next, planned by the last answer (a drop right after a lease, say). */
    let planned: OpRequest | undefined;
    while (issued < opts.ops && !opts.signal.aborted && Date.now() < opts.deadline) {
      const seq = issued++;
      const { request, before } = planned
        ? { request: planned, before: await targetNow(opts.catalog, planned) }
        : await pickOperation(
            rng,
            opts.catalog,
            opts.columns,
            opts.userNames ?? [],
            holder,
            shared,
            opts.units,
            opts.truncatable,
            opts.truncates !== false,
          );
      planned = undefined;
      opts.onOpStarted(request);
      const startedAt = Date.now();
      const cli =
        commandLine !== undefined && request.kind === 'trash' && request.namespace !== undefined && rng.chance(CLI_NAMESPACE_CHANCE);
      const { outcome, door } = await (cli ? commandLine : client).answer(request, before, opts.callTimeoutMs, opts.signal);
      const record: OpRecord = {
        seq,
        client: index,
        request,
        before,
        startedAt,
        endedAt: Date.now(),
        outcome,
        ...(door ? { door } : {}),
        ...(cli ? { cli: true as const } : {}),
      };
      records.push(record);
      if (outcome.kind === 'leased' && request.kind === 'lease') {
        shared.leases.push(outcome.lease);
        planned = followUpOfLease(rng, outcome.lease, before, opts.columns !== undefined, opts.truncates !== false);
      }
      if (outcome.kind === 'ok' && request.kind === 'create' && opts.truncates !== false && rng.chance(TRUNCATE_AFTER_CREATE_CHANCE)) {
        planned = truncateOf(rng, outcome.table, undefined);
      }
      await opts.onAnswer(record);
      opts.onProgress(records.length);
      // A caller that got no answer waits a little before it tries something else, as a real one would.
      await sleep(outcome.kind === 'unknown' ? rng.int(500, 1500) : rng.int(20, 300));
    }
  };

  try {
    await Promise.all(clients.filter((c) => c !== commandLine).map(lane));
  } finally {
    const close = async () => {
      await Promise.all(clients.map((client) => client.close()));
    };
    if (opts.deferClose) opts.deferClose(close);
    else await close();
  }
  return records.sort((a, b) => a.seq - b.seq);
}
