/** The life of a table. Only READY tables are usable by name. */
export const TABLE_STATES = [
  'CREATING',
  'READY',
  'DRAINING',
  'TRASHING',
  'TRASHED',
  'RESTORING',
  'PURGING',
  'PURGED',
  'CREATE_FAILED',
  'TRUNCATING',
] as const;

export type TableState = (typeof TABLE_STATES)[number];

/**
 * States in which a table holds its name: no other table may take the name meanwhile.
 * A trashed table lets go of its name at once, so the name can be created again (Pegasus);
 * a failed create keeps it, so that the same create can resume (CeresDB's prepare record).
 */
export const NAME_HOLDING_STATES: readonly TableState[] = [
  'CREATING',
  'READY',
  'DRAINING',
  'TRASHING',
  'RESTORING',
  'CREATE_FAILED',
  'TRUNCATING',
];

/** Every move a table may make; anything else is a bug or a race and is refused. */
export const TRANSITIONS: Readonly<Record<TableState, readonly TableState[]>> = {
  // CREATING to TRASHING: a table adopted and dropped in one operation goes to the trash without being READY between.
  CREATING: ['READY', 'CREATE_FAILED', 'TRASHING'],
  CREATE_FAILED: ['CREATING'],
  // READY to READY: a rename, the one move that changes the name and nothing else.
  // READY to DRAINING: a drop waits for the table's leases (Qserv's drain), taking no new one; straight to TRASHING
  // when none is held.
  // READY to TRUNCATING: a truncate takes no new lease, waits for those held, and moves the rows out (back to READY).
  READY: ['DRAINING', 'TRASHING', 'READY', 'TRUNCATING'],
  DRAINING: ['TRASHING', 'READY'],
  TRASHING: ['TRASHED', 'READY', 'CREATING'],
  TRASHED: ['RESTORING', 'PURGING'],
  RESTORING: ['READY', 'TRASHED'],
  PURGING: ['PURGED', 'TRASHED'],
  PURGED: [],
  TRUNCATING: ['READY'],
};

export function canTransition(from: TableState, to: TableState): boolean {
  return TRANSITIONS[from].includes(to);
}

/** The columns that change with a state, besides the state itself. Times are epoch milliseconds. */
export interface StateColumns {
  droppedAt?: number | null;
  expireAt?: number | null;
  purgedAt?: number | null;
  /** Who dropped it (the drop's `startedBy`), when the drop knew. */
  droppedBy?: string | null;
  /** What the drop took along with it (TableRecord.family). */
  family?: string[] | null;
  /** The tables dropped with it as one (TableRecord.droppedWith). */
  droppedWith?: number[] | null;
  /** The trash entry a truncate moves its rows into (TableRecord.truncateInto). */
  truncateInto?: number | null;
}

/**
 * What moving from `from` to `to` at time `at` stamps on the row, beside the transition table so that the
 * rules of a state live in one place: a drop stamps its drop time as the table goes to the trash (TRASHING), so that
 * the trash has its identity while its shards move and the trash's expiry can be started beside the move; its commit
 * (TRASHED) keeps that time (`droppedAt`; the commit's own time for a table made TRASHING unstamped, by an older worker)
 * and adds who dropped it (null: the drop did not say) and the expiry its timer waits for (a table going back to the
 * trash from a failed recall or purge keeps all three); a table back from the trash, or from a move to it taken back,
 * has none of them any more; a truncate names the trash entry its rows go to until it ends; a purge leaves its time on
 * the tombstone, beside the drop's.
 */
export function columnsOnEntering(
  from: TableState,
  to: TableState,
  at: number,
  opts: {
    retentionSeconds?: number;
    droppedBy?: string;
    family?: string[];
    droppedWith?: number[];
    truncateInto?: number;
    /** The drop time the row bears (stamped when it entered TRASHING). */
    droppedAt?: number | null;
  } = {},
): StateColumns {
  switch (to) {
    case 'TRASHED': {
      if (from !== 'TRASHING') return {};
      if (opts.retentionSeconds === undefined) throw new Error('entering TRASHED needs a retention');
      const family = opts.family && opts.family.length > 0 ? opts.family : null;
      const droppedWith = opts.droppedWith && opts.droppedWith.length > 0 ? opts.droppedWith : null;
      const droppedAt = opts.droppedAt ?? at;
      return { droppedAt, expireAt: droppedAt + opts.retentionSeconds * 1000, droppedBy: opts.droppedBy ?? null, family, droppedWith };
    }
    case 'READY':
      return { droppedAt: null, expireAt: null, droppedBy: null, family: null, droppedWith: null, truncateInto: null };
    case 'CREATING':
      // (An adopt-and-drop's move taken back: the table is the adopt's again, in no trash.)
      return from === 'TRASHING' ? { droppedAt: null } : {};
    case 'TRUNCATING':
      if (opts.truncateInto === undefined) throw new Error('entering TRUNCATING needs the id of the trash entry its rows go to');
      // (A truncate of several as one, a cascade's, names the others from its start: resumed, it takes them all.)
      return {
        truncateInto: opts.truncateInto,
        ...(opts.droppedWith && opts.droppedWith.length > 0 ? { droppedWith: opts.droppedWith } : {}),
      };
    case 'DRAINING':
    case 'TRASHING': {
      // (A drop of several as one names the others from its start: a drop resumed by the reconciler takes them all.)
      const others = from === 'READY' && opts.droppedWith && opts.droppedWith.length > 0 ? { droppedWith: opts.droppedWith } : {};
      return to === 'TRASHING' ? { ...others, droppedAt: at } : others;
    }
    case 'PURGED':
      return { purgedAt: at };
    default:
      return {};
  }
}
