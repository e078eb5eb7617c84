import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { z } from 'zod';
import type { CatalogReader } from '../../catalog/catalog';
import { createContractActivities } from '../../contract/activities';
import { contractAnswerSchema, contractRequestSchema } from '../../contract/calls';
import { contractDocument, type ContractDocument } from '../../contract/document';
import type { ContractFailureType } from '../../contract/failures';
import { PUBLISHED_JSON, PUBLISHED_README, publishedDocument, withGeneratedSections } from '../../cli/contract-publish';
import { renderContractMarkdown } from '../../cli/contract-text';
import { CONTRACT_CALLS, CONTRACT_READS, CONTRACT_WRITES, contractWorkflowType, NEXUS_SERVICE } from '../../domain/contract';
import { TASK_QUEUE } from '../../domain/deployment';
import {
  DOMAIN_ERROR_TYPES,
  domainError,
  isDomainErrorType,
  isOperationFailureType,
  NoWorkerError,
  OPERATION_FAILURE_TYPES,
  OperationFailedError,
  OperationTimeoutError,
  ServerUnreachableError,
  type TableFateError,
} from '../../domain/errors';
import { tableIdSchema, tableNameSchema, tableRefSchema } from '../../domain/name-schemas';
import { parseRequest } from '../../domain/requests';
import { runCliInProcess } from '../support/cli';

/*
 * The contract a service in any language calls (contract/document.ts): its published copy is the code's, it names every
 * call once by its workflow type, its examples pass the calls' own schemas, and the failures it lists are the ones the
 * calls' activity really throws, with the retryability and the details it gives them.
 */

const ROOT = path.resolve(__dirname, '../..');
const PUBLISH = 'run `npx tsx cli/contract-publish.ts` to publish the contract the code makes';

/** The document as a caller reads it: JSON (no undefined, no functions). */
const asJson = (doc: ContractDocument): unknown => JSON.parse(JSON.stringify(doc));

const published = publishedDocument();

test('docs/contract/contract.json is the contract the code makes, for the default namespace and task queue', () => {
  expect(published).toEqual(contractDocument({ namespace: 'default', taskQueue: TASK_QUEUE }));
  const file: unknown = JSON.parse(fs.readFileSync(PUBLISHED_JSON, 'utf8'));
  try {
    expect(file).toEqual(asJson(published));
  } catch (err) {
    throw new Error(`docs/contract/contract.json is stale: ${PUBLISH}\n${(err as Error).message}`);
  }
});

test("docs/contract/README.md's tables of calls and failures are the document's", () => {
  const readme = fs.readFileSync(PUBLISHED_README, 'utf8');
  if (withGeneratedSections(readme, published) !== readme) throw new Error(`docs/contract/README.md's tables are stale: ${PUBLISH}`);
});

test('every call of the contract is in it once, under its workflow type, its Nexus operation and its kind', () => {
  expect(published.operations.map((op) => op.name)).toEqual([...CONTRACT_CALLS]);
  for (const op of published.operations) {
    expect(op).toMatchObject({
      workflowType: contractWorkflowType(op.name),
      taskQueue: TASK_QUEUE,
      workflowId: published.workflowIdRule,
      nexus: { service: NEXUS_SERVICE, operation: op.name },
      kind: (CONTRACT_WRITES as readonly string[]).includes(op.name) ? 'write' : 'read',
    });
  }
  expect(published.operations.filter((op) => op.kind === 'read').map((op) => op.name)).toEqual([...CONTRACT_READS]);
});

describe.each(CONTRACT_CALLS.map((name) => ({ name, op: published.operations.find((o) => o.name === name)! })))('$name', ({ name, op }) => {
  test("its example's input passes the call's own request schema, its output the answer's", () => {
    expect(() => parseRequest(contractRequestSchema(name), op.example.input)).not.toThrow();
    expect(contractAnswerSchema(name).safeParse(op.example.output)).toMatchObject({ success: true });
  });

  test('its input and output are the JSON Schemas of those schemas', () => {
    expect(op.input).toEqual(z.toJSONSchema(contractRequestSchema(name), { io: 'input' }));
    expect(op.output).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema' });
    // An answer may gain fields without breaking a caller: no object of it refuses one it does not name.
    expect(JSON.stringify(op.output)).not.toContain('additionalProperties');
  });

  test('a write names the TableOp of the run it starts, a read starts none', () => {
    const tableOp = op.searchAttributes.find((a) => a.name === 'TableOp');
    if (op.kind === 'read') expect(op.searchAttributes).toEqual([]);
    else if (tableOp) expect(tableOp).toMatchObject({ type: 'KEYWORD', value: expect.any(String) as unknown });
    // Every call can be refused for its input; every write can meet the server lost, and retries it.
    expect(op.failures.map((f) => f.type)).toContain('InvalidInput');
    expect(op.failures.some((f) => f.retryable)).toBe(op.kind === 'write');
  });
});

/** An error of each type the contract names, as the SDK throws it (with the fields of its own it carries). */
function errorOf(type: ContractFailureType): TableFateError {
  if (isDomainErrorType(type)) return domainError(type, 'refused');
  if (isOperationFailureType(type)) return new OperationFailedError(type, 'failed', 'trash:42@1f0c9a2e');
  switch (type) {
    case 'OperationTimeout':
      return new OperationTimeoutError('no answer', 'trash:42@1f0c9a2e', 86_400_000, true);
    case 'NoWorker':
      return new NoWorkerError('no worker', TASK_QUEUE, 'default', '127.0.0.1:7233');
    case 'ServerUnreachable':
      return new ServerUnreachableError('lost', '127.0.0.1:7233', { mayHaveStarted: true, workflowId: 'trash:42@1f0c9a2e' });
  }
}

/** The SDK's client failures a call can meet: the rest of ContractFailureType is the domain's and the operations'. */
const CLIENT_FAILURES = ['OperationTimeout', 'NoWorker', 'ServerUnreachable'] as const satisfies readonly ContractFailureType[];
const EVERY_FAILURE: readonly ContractFailureType[] = [...DOMAIN_ERROR_TYPES, ...OPERATION_FAILURE_TYPES, ...CLIENT_FAILURES];

test('every failure type it names is a real error type of the SDK, and its list at the end has each a call can meet', () => {
  const real = new Set<string>([...DOMAIN_ERROR_TYPES, ...OPERATION_FAILURE_TYPES, ...CLIENT_FAILURES.map((type) => errorOf(type).type)]);
  const named = [...published.failures, ...published.operations.flatMap((op) => op.failures)].map((f) => f.type);
  expect(named.filter((type) => !real.has(type))).toEqual([]);
  expect(published.failures.map((f) => f.type).sort()).toEqual([...EVERY_FAILURE].sort());
});

test("each failure reaches a caller as the contract says: its type, retried or not, its details[0]'s fields", async () => {
  // A plan reads the catalog and never the server: the activity's client is a stand-in the SDK holds and never calls.
  const client = { withAbortSignal: (_signal: AbortSignal, fn: () => unknown) => fn() } as unknown as Client;
  const env = new MockActivityEnvironment({}, { logger: new DefaultLogger('ERROR', () => undefined), client });
  const listed = new Map(published.failures.map((failure) => [failure.type, failure]));
  for (const failureType of EVERY_FAILURE) {
    // A purge's plan reads the table: a catalog that throws the error makes the call fail with it, as the worker's does.
    const catalog = { getTable: () => Promise.reject(errorOf(failureType)) } as unknown as CatalogReader;
    const activities = createContractActivities({ catalog, taskQueue: TASK_QUEUE, storageDriver: 'files' });
    const thrown = await env
      .run(() => activities.planContractCall({ name: 'purge', request: { tableId: 42 } }))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(thrown).toBeInstanceOf(ApplicationFailure);
    const { type, nonRetryable, details } = thrown as ApplicationFailure;
    const failure = listed.get(failureType);
    expect({ type, retryable: !nonRetryable, fields: Object.keys((details?.[0] as object | undefined) ?? {}).sort() }).toEqual({
      type: failureType,
      retryable: failure?.retryable,
      fields: Object.keys(failure?.details ?? {}).sort(),
    });
  }
});

describe("the request schemas' JSON Schema patterns", () => {
  /** Whether a value passes a JSON Schema of the forms these use: a type with bounds or a pattern, or anyOf them. */
  function passes(schema: z.core.JSONSchema.JSONSchema, value: unknown): boolean {
    if (schema.anyOf) return schema.anyOf.some((branch) => typeof branch === 'object' && passes(branch, value));
    if (schema.type === 'string') return typeof value === 'string' && new RegExp(schema.pattern!).test(value);
    if (schema.type === 'integer') {
      return typeof value === 'number' && Number.isInteger(value) && value >= schema.minimum! && value <= schema.maximum!;
    }
    throw new Error(`not a form this test reads: ${JSON.stringify(schema)}`);
  }
  const names = [
    'orders',
    'shop.orders',
    'a',
    'a_1.b2',
    'x'.repeat(63),
    'x'.repeat(64),
    'Shop.orders',
    '1shop.orders',
    'a.b.c',
    'a.',
    '.a',
    '',
    'shop."Orders"',
    '"my.app"."a.b"',
    'shop."say ""hi"""',
    `shop."${'x'.repeat(63)}"`,
    `shop."${'x'.repeat(64)}"`,
    'shop.""',
    'shop."open',
    'shop."a"b',
    'shop.ördérs',
    '_staging.t$1',
  ];
  const ids = [1, 42, 0, -1, 2.5, Number.MAX_SAFE_INTEGER, '42', '007', '0', '00', ' 5', '0x10', '1e3', '-3', '4.0'];

  test.each([
    ['a table name', tableNameSchema],
    ['a table id', tableIdSchema],
    ['a table by id or name', tableRefSchema],
  ])('%s: its pattern accepts exactly what its transform accepts', (_, schema) => {
    const json = z.toJSONSchema(schema, { io: 'input' });
    const differ = [...names, ...ids].filter((value) => passes(json, value) !== schema.safeParse(value).success);
    expect(differ).toEqual([]);
  });
});

describe('tablefate contract', () => {
  const env = { TEMPORAL_NAMESPACE: 'orders-prod' };

  test('--json prints the contract of the namespace the environment names', async () => {
    const result = await runCliInProcess(['contract', '--json'], { env });
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual(asJson(contractDocument({ namespace: 'orders-prod', taskQueue: TASK_QUEUE })));
  });

  test('without --json, the same for a person', async () => {
    const result = await runCliInProcess(['contract'], { env });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${renderContractMarkdown(contractDocument({ namespace: 'orders-prod', taskQueue: TASK_QUEUE }))}\n`);
  });

  test('a reader that stops reading ends the output quietly: exit 0, nothing on stderr', async () => {
    // (The process as a person runs it, its stdout a pipe closed after the first line: `tablefate contract | head -1`.)
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'tablefate.js'), 'contract', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });

  test('it loads neither the Temporal client nor the catalog', () => {
    const script =
      "require('./cli/main').main(['contract', '--json'], { env: {}, out: () => undefined, err: (t) => process.stderr.write(t) })" +
      '.then((code) => { const files = Object.keys(require.cache);' +
      'console.log(JSON.stringify({ code, loaded: files.filter((f) => /@temporalio[/]client[/]|[/]catalog[/]/.test(f)) })) })';
    const loaded = JSON.parse(execFileSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: ROOT, encoding: 'utf8' })) as unknown;
    expect(loaded).toEqual({ code: 0, loaded: [] });
  });
});
