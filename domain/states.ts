/** The life of a table. Only READY tables are usable by name. */
export const TABLE_STATES = [
  'CREATING',
  'READY',
  'TRASHING',
  'TRASHED',
  'RESTORING',
  'PURGING',
  'PURGED',
  'CREATE_FAILED',
] as const;

export type TableState = (typeof TABLE_STATES)[number];

/**
 * States in which a table holds its name: no other table may take the name meanwhile.
 * A trashed table lets go of its name at once, so the name can be created again (Pegasus);
 * a failed create keeps it, so that the same create can resume (CeresDB's prepare record).
 */
export const NAME_HOLDING_STATES: readonly TableState[] = ['CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED'];

/** Every move a table may make; anything else is a bug or a race and is refused. */
export const TRANSITIONS: Readonly<Record<TableState, readonly TableState[]>> = {
  CREATING: ['READY', 'CREATE_FAILED'],
  CREATE_FAILED: ['CREATING'],
  READY: ['TRASHING'],
  TRASHING: ['TRASHED', 'READY'],
  TRASHED: ['RESTORING', 'PURGING'],
  RESTORING: ['READY', 'TRASHED'],
  PURGING: ['PURGED', 'TRASHED'],
  PURGED: [],
};

export function canTransition(from: TableState, to: TableState): boolean {
  return TRANSITIONS[from].includes(to);
}
