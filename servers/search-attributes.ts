import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
// The SDK's own encoder from a SearchAttributeType to temporal.api.enums.v1.IndexedValueType
// (@temporalio/proto is not a direct dependency of this project).
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';

export { SEARCH_ATTRIBUTES } from '../domain/search-attributes';

/** The IndexedValueType enum value of a search attribute type. */
export function indexedValueType(type: SearchAttributeType): number {
  const encoded = encodeSearchAttributeIndexedValueType(type);
  if (encoded === undefined) throw new Error(`no indexed value type for search attribute type ${type}`);
  return encoded;
}

function typeName(indexed: number | null | undefined): string {
  const found = Object.values(SearchAttributeType).find((t) => indexedValueType(t) === indexed);
  return found ?? `IndexedValueType(${String(indexed)})`;
}

async function customAttributes(connection: Connection, namespace: string): Promise<Record<string, number>> {
  const listed = await connection.operatorService.listSearchAttributes({ namespace });
  return { ...(listed.customAttributes ?? {}) };
}

/**
 * Adds the project's search attributes to `namespace` where they are missing. Idempotent: the dev server's
 * `--search-attribute` flag is ignored on an existing db file, so this runs on every start.
 * Throws if an attribute exists with another type (it cannot be changed in place).
 * Returns the names it added.
 */
export async function registerSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  const check = (existing: Record<string, number>) => {
    for (const key of wanted) {
      const have = existing[key.name];
      if (have !== undefined && have !== indexedValueType(key.type)) {
        throw new Error(
          `search attribute ${key.name} exists in namespace ${namespace} as ${typeName(have)}, but tablefate needs ${key.type}`,
        );
      }
    }
    return wanted.filter((key) => existing[key.name] === undefined);
  };

  const missing = check(await customAttributes(connection, namespace));
  if (missing.length === 0) return [];
  const searchAttributes: Record<string, number> = {};
  for (const key of missing) searchAttributes[key.name] = indexedValueType(key.type);
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Someone else (another process starting at the same time) may have added them first.
    if (check(await customAttributes(connection, namespace)).length > 0) throw err;
  }
  return missing.map((key) => key.name);
}

/**
 * Resolves once the frontend accepts every one of the project's search attributes in a query. An attribute just added
 * is in the database at once, but a cluster's frontends read a namespace's attributes from a cache refreshed some 10 s
 * later: until then a workflow started with them is refused ("no mapping defined for search attribute"). The query is
 * checked against that same mapping, and changes nothing.
 */
export async function searchAttributesServed(connection: Connection, namespace: string, timeoutMs: number): Promise<void> {
  const query = Object.values(SEARCH_ATTRIBUTES)
    .map((key) => `${key.name} IS NULL`)
    .join(' OR ');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1, query });
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(
          `the Temporal frontend did not serve tablefate's search attributes within ${timeoutMs} ms: ${(err as Error).message}`,
        );
      }
      await sleep(250);
    }
  }
}
