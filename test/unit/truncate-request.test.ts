import { parseArgs } from 'node:util';
import type { TableFateClient } from '../../client/client';
import { truncate } from '../../cli/table-commands';
import { COMMON, type RunContext } from '../../cli/command';
import { InvalidInputError } from '../../domain/errors';
import { parseRequest, truncateRequestSchema, type TruncateRequest } from '../../domain/requests';

/*
 * A truncate's request at the edges (issue 43): what the SDK accepts of it, and what `tablefate truncate` asks for. The
 * cascade is asked for only when given, so that a truncate without it is the request it always was.
 */

describe('the request', () => {
  test('cascade is a boolean, kept as given; absent, the request has none', () => {
    expect(parseRequest(truncateRequestSchema, { table: 'shop.accounts', cascade: true })).toEqual({
      table: { kind: 'name', namespace: 'shop', name: 'accounts' },
      cascade: true,
    });
    expect(parseRequest(truncateRequestSchema, { table: 42 })).toEqual({ table: { kind: 'id', id: 42 } });
    expect(() => parseRequest(truncateRequestSchema, { table: 42, cascade: 'yes' })).toThrow(/^cascade: /);
  });

  test('stays strict: a field it does not know is refused, named', () => {
    expect(() => parseRequest(truncateRequestSchema, { table: 42, cascaded: true })).toThrow(InvalidInputError);
    expect(() => parseRequest(truncateRequestSchema, { table: 42, cascaded: true })).toThrow(/cascaded/);
  });
});

describe('tablefate truncate', () => {
  /** The request `tablefate truncate <argv>` makes of the SDK. */
  async function requestOf(...argv: string[]): Promise<TruncateRequest> {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { ...COMMON, ...truncate.spec!.options },
      strict: true,
      allowPositionals: true,
    });
    let asked: TruncateRequest | undefined;
    const client = { truncate: (request: TruncateRequest) => ((asked = request), Promise.resolve()) } as unknown as TableFateClient;
    await truncate.spec!.run({
      command: 'truncate',
      values,
      args: positionals,
      withClient: (fn) => fn(client),
      progress: () => undefined,
    } as Partial<RunContext> as RunContext);
    return asked!;
  }

  test('--cascade asks for the cascade; without it, the request has none', async () => {
    expect(await requestOf('shop.accounts', '--cascade')).toMatchObject({ table: 'shop.accounts', cascade: true });
    expect(await requestOf('shop.accounts', '-r', '600')).not.toHaveProperty('cascade');
  });
});
