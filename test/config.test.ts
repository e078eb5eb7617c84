import path from 'node:path';
import { statePaths } from '../worker/config';
import { runCli, runCliInProcess } from './support/cli';
import { tempRootPerTest, touch } from './support/temp-root';

/*
 * `tablefate worker` refuses a configuration that is wrong before it does anything (the rules themselves are
 * tested without a process: test/unit/config-loading.test.ts).
 */

describe('`tablefate worker` with a bad configuration', () => {
  let root = '';
  tempRootPerTest('tablefate-nodes-', (made) => (root = made));
  const put = (relative: string) => touch(root, relative);

  test('make `tablefate worker` refuse to start, naming the node and how many files it holds', async () => {
    const home = root;
    const storage = statePaths(home).storage;
    for (const file of ['node-2/live/t3-s1.dat', 'node-2/live/t3-s1.idx', 'node-2/live/t3-s1.meta', 'node-2/trash/t4-s0.dat.gar']) {
      await put(path.relative(root, path.join(storage, file)));
    }
    const result = await runCli(['worker'], {
      // No server at that address: had the worker not refused first, it would fail there instead.
      env: {
        ...process.env,
        TABLEFATE_HOME: home,
        TEMPORAL_ADDRESS: '127.0.0.1:9',
        TABLEFATE_STORAGE_NODES: '2',
        TABLEFATE_LOG_LEVEL: 'warn',
      },
      timeoutMs: 30_000,
    });
    expect({ code: result.code, stdout: result.stdout, stderr: result.stderrLines }).toEqual({
      code: 1,
      stdout: '',
      stderr: [
        `tablefate: Error: TABLEFATE_STORAGE_NODES=2 leaves shards behind: node-2 holds 4 shard files (under ${storage}); ` +
          'set TABLEFATE_STORAGE_NODES to at least 3, or move those tables away first',
      ],
    });
  });

  test('a malformed number makes `tablefate worker` fail naming the variable, before doing anything', async () => {
    // (In-process: the configuration is refused before any worker code loads.)
    const result = await runCliInProcess(['worker'], {
      env: { ...process.env, TABLEFATE_HOME: root, TEMPORAL_ADDRESS: '127.0.0.1:9', TABLEFATE_DEFAULT_RETENTION_SECONDS: '' },
    });
    expect(result.code).not.toBe(0);
    expect(result.stderrLines).toEqual([
      expect.stringContaining(
        'TABLEFATE_DEFAULT_RETENTION_SECONDS: must be a whole number of seconds from 1 to 315360000, got ""',
      ) as unknown,
    ]);
  });
});
