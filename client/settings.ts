import { randomUUID } from 'node:crypto';
import { OPERATIONS, type ConfigureInput } from '../domain/operations';
import {
  configGetRequestSchema,
  configSetRequestSchema,
  configUnsetRequestSchema,
  parseRequest,
  type ConfigGetRequest,
  type ConfigSetRequest,
  type ConfigUnsetRequest,
} from '../domain/requests';
import { defaultSettings, effectiveSetting, SETTING_KEYS, type EffectiveSetting } from '../domain/settings';
import type { configureTrash } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import type { WriteOptions } from './options';
import { startAndWait } from './start';

/** The runtime settings: read from the catalog, changed by a run of configureTrash. */

export async function getSettings(ctx: ClientContext, request: ConfigGetRequest): Promise<EffectiveSetting[]> {
  const { key, namespace } = parseRequest(configGetRequestSchema, request);
  const rows = await ctx.catalog.listSettings();
  return (key ? [key] : SETTING_KEYS).map((k) => effectiveSetting(rows, k, namespace ?? null, defaultSettings()));
}

export async function setSetting(ctx: ClientContext, request: ConfigSetRequest, opts: WriteOptions): Promise<EffectiveSetting> {
  const { key, value, namespace } = parseRequest(configSetRequestSchema, request);
  return configure(ctx, { key, namespace: namespace ?? null, value }, opts);
}

export async function unsetSetting(ctx: ClientContext, request: ConfigUnsetRequest, opts: WriteOptions): Promise<EffectiveSetting> {
  const { key, namespace } = parseRequest(configUnsetRequestSchema, request);
  return configure(ctx, { key, namespace: namespace ?? null }, opts);
}

async function configure(ctx: ClientContext, change: Omit<ConfigureInput, 'catalogId'>, opts: WriteOptions): Promise<EffectiveSetting> {
  const timeoutMs = callTimeout(ctx, opts);
  const record = OPERATIONS.configure;
  const scope = change.namespace === null ? 'globally' : `for namespace ${change.namespace}`;
  const what = change.value === undefined ? `unset ${change.key} ${scope}` : `set ${change.key} ${scope}`;
  const rows = await startAndWait<typeof configureTrash>(ctx, {
    workflowId: record.workflowId(randomUUID(), ctx.catalog.id),
    what,
    check: '`tablefate config get`',
    timeoutMs,
    run: { record, input: change, target: {}, summary: what },
  });
  return effectiveSetting(rows, change.key, change.namespace, defaultSettings());
}
