import { lockFor } from '../domain/operations';
import { type CreateInput } from '../domain/operation-inputs';
import { nameOf, SHARDS, transition, type Operation } from '../domain/steps';
import { definitionOf, type TableInfo } from '../domain/table';
import { operationWorkflow } from './execute';

/**
 * Creates a table, idempotently: the id and placement are chosen once and kept in a prepare record, so running the same
 * create again after a failure lands on the same id and shards (CeresDB's proposal). An adopt runs this workflow too:
 * its definition (`adopt`) makes the shard step record the table that exists instead of making one, and the undo forget
 * it instead of dropping it (the storage driver reads the definition).
 */
export const create: Operation<CreateInput> = {
  name: 'create',
  steps: [
    {
      // The record takes the name's lock and the table's own; either may be held by another operation (a create of the
      // same name, a trash of the record an earlier attempt left), which the create waits for. A create found done is
      // the same table: the operation ends there. Undone, the record is kept, marked failed, so that a retry resumes it.
      name: 'prepare',
      change: ({ input }) => ({
        kind: 'prepareCreate',
        table: nameOf(input),
        // Only what was asked: the params of a create without a definition keep their old shape.
        params: { shards: input.shards, ...definitionOf(input) },
        nameLock: lockFor.name(input),
      }),
      undo: { change: transition('CREATING', 'CREATE_FAILED') },
    },
    { name: 'create shards', shards: SHARDS.create, undo: { shards: SHARDS.drop } },
    { name: 'commit ready', change: transition('CREATING', 'READY') },
  ],
};

export const createTable: (input: CreateInput) => Promise<TableInfo> = operationWorkflow(create);
