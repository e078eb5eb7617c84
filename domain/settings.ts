import { DEFAULT_RETENTION_SECONDS, MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS } from './limits';

/**
 * The runtime settings: kept in the catalog, changed with `tablefate config set` while everything runs, read by the
 * workers when an operation needs them (never cached). A namespace's value overrides the global one, which overrides the
 * default. Pure: workflow code reads the policies they make.
 */
export const SETTING_KEYS = ['trash.enabled', 'trash.retentionSeconds', 'trash.maxBytes'] as const;
export type SettingKey = (typeof SETTING_KEYS)[number];

/** The value of each key: a switch, a number of seconds, a number of bytes or null (unlimited). */
export interface SettingValues {
  'trash.enabled': boolean;
  'trash.retentionSeconds': number;
  'trash.maxBytes': number | null;
}

export type SettingValue = SettingValues[SettingKey];

/** Where the value in force comes from. */
export type SettingSource = 'namespace' | 'global' | 'default';

/** One stored value: global (`namespace` null) or a namespace's. */
export interface SettingRow {
  key: SettingKey;
  namespace: string | null;
  value: SettingValue;
  updatedAt: number;
}

/** What `config get` answers for one key. */
export interface EffectiveSetting {
  key: SettingKey;
  value: SettingValue;
  source: SettingSource;
  /** The namespace asked about, if one was. */
  namespace: string | null;
}

/** The largest trash.maxBytes: 2^53 - 1 bytes (8 PiB), as exact as a JS number keeps it. */
export const MAX_TRASH_BYTES = Number.MAX_SAFE_INTEGER;

/** The defaults; the retention's is the worker's configured one (TABLEFATE_TRASH_RETENTION_SECONDS) where a worker asks. */
export function defaultSettings(retentionSeconds: number = DEFAULT_RETENTION_SECONDS): SettingValues {
  return { 'trash.enabled': true, 'trash.retentionSeconds': retentionSeconds, 'trash.maxBytes': null };
}

export const isSettingKey = (key: unknown): key is SettingKey =>
  typeof key === 'string' && (SETTING_KEYS as readonly string[]).includes(key);

/**
 * A value as typed on the command line, checked for its key: the reason it is refused, or the value. `unlimited` (or
 * `none`) is the maxBytes of no cap.
 */
export function parseSettingValue(key: SettingKey, text: string): { value: SettingValue } | { refused: string } {
  switch (key) {
    case 'trash.enabled':
      if (text === 'true') return { value: true };
      if (text === 'false') return { value: false };
      return { refused: `trash.enabled is true or false, not "${text}"` };
    case 'trash.retentionSeconds': {
      const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
      if (!(n >= MIN_RETENTION_SECONDS && n <= MAX_RETENTION_SECONDS)) {
        return {
          refused: `trash.retentionSeconds is a whole number of seconds from ${MIN_RETENTION_SECONDS} to ${MAX_RETENTION_SECONDS}, not "${text}"`,
        };
      }
      return { value: n };
    }
    case 'trash.maxBytes': {
      if (text === 'unlimited' || text === 'none') return { value: null };
      const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
      if (!(n >= 0 && n <= MAX_TRASH_BYTES)) {
        return { refused: `trash.maxBytes is a whole number of bytes from 0 to ${MAX_TRASH_BYTES}, or unlimited, not "${text}"` };
      }
      return { value: n };
    }
  }
}

/** A value as `config get` prints it. */
export function formatSettingValue(value: SettingValue): string {
  return value === null ? 'unlimited' : String(value);
}

/** The value in force for `key` in `namespace` (or globally), and where it comes from. */
export function effectiveSetting(
  rows: readonly SettingRow[],
  key: SettingKey,
  namespace: string | null,
  defaults: SettingValues,
): EffectiveSetting {
  const own = namespace === null ? undefined : rows.find((r) => r.key === key && r.namespace === namespace);
  if (own) return { key, value: own.value, source: 'namespace', namespace };
  const global = rows.find((r) => r.key === key && r.namespace === null);
  if (global) return { key, value: global.value, source: 'global', namespace };
  return { key, value: defaults[key], source: 'default', namespace };
}

/** What a drop in `namespace` does with the table it trashes: the settings in force there. */
export interface TrashPolicy {
  enabled: boolean;
  retentionSeconds: number;
  maxBytes: number | null;
}

export function trashPolicy(rows: readonly SettingRow[], namespace: string, defaults: SettingValues): TrashPolicy {
  const get = <K extends SettingKey>(key: K) => effectiveSetting(rows, key, namespace, defaults).value as SettingValues[K];
  return { enabled: get('trash.enabled'), retentionSeconds: get('trash.retentionSeconds'), maxBytes: get('trash.maxBytes') };
}

/**
 * The trash's space caps: the trashed tables of each namespace with a trash.maxBytes of its own are capped by it;
 * those of every other namespace together by the global value. A cap of null is no cap. Pure, for the eviction.
 */
export function spaceCaps(
  rows: readonly SettingRow[],
  namespaces: Iterable<string>,
): Array<{ namespaces: string[]; maxBytes: number | null; scope: string }> {
  const own = new Map(
    rows.filter((r) => r.key === 'trash.maxBytes' && r.namespace !== null).map((r) => [r.namespace!, r.value as number | null]),
  );
  const global = (rows.find((r) => r.key === 'trash.maxBytes' && r.namespace === null)?.value ?? null) as number | null;
  const pooled: string[] = [];
  const caps: Array<{ namespaces: string[]; maxBytes: number | null; scope: string }> = [];
  for (const ns of [...new Set(namespaces)].sort()) {
    if (own.has(ns)) caps.push({ namespaces: [ns], maxBytes: own.get(ns)!, scope: `namespace ${ns}` });
    else pooled.push(ns);
  }
  if (pooled.length > 0) caps.push({ namespaces: pooled, maxBytes: global, scope: 'global' });
  return caps;
}
