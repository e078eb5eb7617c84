import type { ConfigureInput } from '../domain/operation-inputs';
import type { SettingRow } from '../domain/settings';
import { catalogCalls } from './catalog-calls';

/**
 * A runtime setting set or unset (`tablefate config set|unset`): one change of the catalog, which every worker reads
 * the next time an operation needs it. A space cap set (trash.maxBytes) is checked at once: the trash's eviction runs.
 */
export async function configureTrash(input: ConfigureInput): Promise<SettingRow[]> {
  const calls = catalogCalls(input.catalogId);
  const settings = await calls.changeSetting({
    key: input.key,
    namespace: input.namespace,
    ...(input.value !== undefined ? { value: input.value } : {}),
    now: Date.now(),
  });
  if (input.key === 'trash.maxBytes') await calls.requestEviction();
  return settings;
}
