import { promises as fs } from 'node:fs';
import path from 'node:path';
import { InvalidInputError } from '../../domain/errors';
import { redactUrl } from '../../domain/deployment';
import { DEFAULT_STORAGE_RETRY_ATTEMPTS, MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS } from '../../domain/limits';
import { parseRequest, trashRequestSchema } from '../../domain/requests';
import { assertNodesHoldAllShards, shardsBeyond } from '../../storage/nodes';
import { loadConfig } from '../../worker/config';
import { tempRootPerTest, touch } from '../support/temp-root';

/*
 * The worker's configuration is strict: a number that is empty or malformed is an error naming the variable
 * and the value, never 0; retention has the same bounds in the configuration as in a trash request; and a
 * node count that would strand shards keeps the worker from starting (the worker's refusals, in a process of its
 * own, are in test/config.test.ts).
 */

/** The message loadConfig fails with for `env`, or undefined if it accepts it. */
function configError(env: NodeJS.ProcessEnv): string | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('loadConfig', () => {
  test('an empty environment gives the documented defaults', () => {
    expect(loadConfig({})).toMatchObject({
      temporalAddress: '127.0.0.1:7233',
      temporalNamespace: 'default',
      defaultRetentionSeconds: 7 * 24 * 3600,
      storageNodes: 3,
      storageRetryAttempts: DEFAULT_STORAGE_RETRY_ATTEMPTS,
      workflowCache: 50,
      logLevel: 'info',
    });
    expect(DEFAULT_STORAGE_RETRY_ATTEMPTS).toBe(10);
  });

  test('well-formed numbers are read as given', () => {
    expect(
      loadConfig({
        TABLEFATE_DEFAULT_RETENTION_SECONDS: '600',
        TABLEFATE_STORAGE_NODES: '64',
        TABLEFATE_STORAGE_RETRY_ATTEMPTS: '1',
        TABLEFATE_WORKFLOW_CACHE: '400',
      }),
    ).toMatchObject({ defaultRetentionSeconds: 600, storageNodes: 64, storageRetryAttempts: 1, workflowCache: 400 });
    // Fewer than the 40 workflow tasks a worker runs at once is refused.
    expect(configError({ TABLEFATE_WORKFLOW_CACHE: '39' })).toMatch(
      /TABLEFATE_WORKFLOW_CACHE: must be a whole number of workflow runs from 40 to 100000, got "39"/,
    );
  });

  const numeric = [
    'TABLEFATE_DEFAULT_RETENTION_SECONDS',
    'TABLEFATE_STORAGE_NODES',
    'TABLEFATE_STORAGE_RETRY_ATTEMPTS',
    'TABLEFATE_WORKFLOW_CACHE',
  ];
  const malformed = ['', ' ', '0', '-5', '+5', '1.5', '1e3', '0x10', ' 7', 'abc', '99999999999999999999'];

  test.each(numeric)('%s empty or malformed is an error naming the variable and the value, never 0', (variable) => {
    const messages = malformed.map((value) => [value, configError({ [variable]: value })]);
    expect(messages).toEqual(malformed.map((value) => [value, expect.stringContaining(`${variable}: must be a whole number`) as unknown]));
    for (const [value, message] of messages) expect(message).toContain(`got ${JSON.stringify(value)}`);
  });

  test('an empty TABLEFATE_DEFAULT_RETENTION_SECONDS is refused instead of purging every default trash at once', () => {
    expect(configError({ TABLEFATE_DEFAULT_RETENTION_SECONDS: '' })).toBe(
      'invalid configuration: TABLEFATE_DEFAULT_RETENTION_SECONDS: must be a whole number of seconds from 1 to 315360000, got ""',
    );
  });

  test('out of range values are refused: nodes 1 to 64, retry attempts at least 1', () => {
    expect(configError({ TABLEFATE_STORAGE_NODES: '65' })).toMatch(
      /TABLEFATE_STORAGE_NODES: must be a whole number from 1 to 64, got "65"/,
    );
    expect(configError({ TABLEFATE_STORAGE_RETRY_ATTEMPTS: '0' })).toMatch(/TABLEFATE_STORAGE_RETRY_ATTEMPTS: .* got "0"/);
  });

  test('every bad variable is named at once', () => {
    const message = configError({ TABLEFATE_STORAGE_NODES: 'x', TABLEFATE_STORAGE_RETRY_ATTEMPTS: '' });
    expect(message).toMatch(/TABLEFATE_STORAGE_NODES: .*got "x"/);
    expect(message).toMatch(/TABLEFATE_STORAGE_RETRY_ATTEMPTS: .*got ""/);
  });
});

describe('retention bounds', () => {
  const requestError = (retentionSeconds: number) => {
    try {
      parseRequest(trashRequestSchema, { table: 'shop.orders', retentionSeconds });
      return undefined;
    } catch (err) {
      return err;
    }
  };

  test('are 1 s to 10 years, the same for a trash request and for the configured default', () => {
    expect([MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS]).toEqual([1, 10 * 365 * 24 * 3600]);
    for (const ok of [MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS]) {
      expect({ ok, request: requestError(ok), config: configError({ TABLEFATE_DEFAULT_RETENTION_SECONDS: String(ok) }) }).toEqual({
        ok,
        request: undefined,
        config: undefined,
      });
    }
    for (const bad of [MIN_RETENTION_SECONDS - 1, MAX_RETENTION_SECONDS + 1]) {
      expect(requestError(bad)).toBeInstanceOf(InvalidInputError);
      expect(configError({ TABLEFATE_DEFAULT_RETENTION_SECONDS: String(bad) })).toContain(`got "${bad}"`);
    }
  });
});

describe('storage nodes beyond the configured count', () => {
  let root = '';
  tempRootPerTest('tablefate-nodes-', (made) => (root = made));
  const put = (relative: string) => touch(root, relative);

  test('are counted by the shard files they hold in live, trash and garbage; empty or temporary ones do not count', async () => {
    await put('node-2/live/t1-s2.dat'); // within 3 nodes
    await put('node-3/live/t1-s3.dat');
    await put('node-3/trash/t5-s0.idx');
    await put('node-3/trash/t6-s0.meta.gar');
    await put('node-3/tmp/t7-s0.dat.0a1b2c.tmp'); // a crashed create's temporary file: not a shard
    await put('node-3/QUARANTINED');
    await fs.mkdir(path.join(root, 'node-4', 'live'), { recursive: true });
    await put('node-11/trash/t8-s1.dat');
    await put('not-a-node/live/t9-s0.dat');

    expect(await shardsBeyond(root, 3)).toEqual([
      { node: 'node-3', shardFiles: 3 },
      { node: 'node-11', shardFiles: 1 },
    ]);
    expect(await shardsBeyond(root, 12)).toEqual([]);
    await expect(assertNodesHoldAllShards(root, 3)).rejects.toThrow(
      'TABLEFATE_STORAGE_NODES=3 leaves shards behind: node-3 holds 3 shard files, node-11 holds 1 shard file',
    );
    await expect(assertNodesHoldAllShards(root, 3)).rejects.toThrow(/set TABLEFATE_STORAGE_NODES to at least 12/);
    await assertNodesHoldAllShards(root, 12);
  });

  test('a storage directory that does not exist yet holds nothing', async () => {
    await assertNodesHoldAllShards(path.join(root, 'missing'), 1);
  });
});

describe('redactUrl', () => {
  test('a password is never shown, in its user part or as a query parameter (any case), and nothing else changes', () => {
    expect(redactUrl('postgres://tf:s3cret@db1:5432/app')).toBe('postgres://tf@db1:5432/app');
    expect(redactUrl('postgres://tf@db1:5432/app?sslmode=require&password=s3cret')).toBe(
      'postgres://tf@db1:5432/app?sslmode=require&password=REDACTED',
    );
    expect(redactUrl('postgresql://db1/app?PassWord=s3cret&application_name=x')).not.toContain('s3cret');
    expect(redactUrl('postgres://tf@db1:5432/app?sslmode=require')).toBe('postgres://tf@db1:5432/app?sslmode=require');
    // Not a url at all: the user part and the parameter are still cut.
    expect(redactUrl('postgres://tf:s3cret@[bad/app?password=again')).not.toMatch(/s3cret|again/);
  });
});
