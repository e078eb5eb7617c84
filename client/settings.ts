import { randomUUID } from 'node:crypto';
import { OPERATIONS } from '../domain/operations';
import { type ConfigureInput } from '../domain/operation-inputs';
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
import { repeatable, type CallRecord, type ExecuteOptions } from './calls';

/** The runtime settings: read from the catalog, changed by a run of configureTrash. */

export async function getSettings(ctx: ClientContext, request: ConfigGetRequest): Promise<EffectiveSetting[]> {
  const { key, namespace } = parseRequest(configGetRequestSchema, request);
  const rows = await ctx.catalog.listSettings();
  return (key ? [key] : SETTING_KEYS).map((k) => effectiveSetting(rows, k, namespace ?? null, defaultSettings()));
}

/** A setting change's plan: the change, and its run's own id (drawn here). */
interface ConfigurePlan {
  change: Omit<ConfigureInput, 'catalogId'>;
  runId: string;
}

export const setSettingCall: CallRecord<ConfigSetRequest, ConfigurePlan, EffectiveSetting> = {
  plan(_ctx, request) {
    const { key, value, namespace } = parseRequest(configSetRequestSchema, request);
    return { plan: { change: { key, namespace: namespace ?? null, value }, runId: randomUUID() } };
  },
  execute: (ctx, plan, opts) => configure(ctx, plan, opts),
};

export const unsetSettingCall: CallRecord<ConfigUnsetRequest, ConfigurePlan, EffectiveSetting> = {
  plan(_ctx, request) {
    const { key, namespace } = parseRequest(configUnsetRequestSchema, request);
    return { plan: { change: { key, namespace: namespace ?? null }, runId: randomUUID() } };
  },
  execute: (ctx, plan, opts) => configure(ctx, plan, opts),
};

async function configure(
  ctx: ClientContext,
  { change, runId }: ConfigurePlan,
  opts: WriteOptions & ExecuteOptions,
): Promise<EffectiveSetting> {
  const record = OPERATIONS.configure;
  const scope = change.namespace === null ? 'globally' : `for namespace ${change.namespace}`;
  const what = change.value === undefined ? `unset ${change.key} ${scope}` : `set ${change.key} ${scope}`;
  const rows = await startAndWait<typeof configureTrash>(ctx, {
    workflowId: record.workflowId(runId, ctx.catalog.id),
    what,
    check: '`tablefate config get`',
    timeoutMs: callTimeout(ctx, opts),
    ...repeatable(opts),
    run: { record, input: change, target: {}, summary: what },
  });
  return effectiveSetting(rows, change.key, change.namespace, defaultSettings());
}
