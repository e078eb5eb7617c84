// The operations' step lists, by name: what a worker's executor (activities/steps-here.ts) runs for the workflows.
import type { OperationRegistry } from '../activities/steps-here';
import { adoptTrash } from './adopt-trash';
import { create } from './create';
import { hold } from './hold';
import { purge } from './purge';
import { rename } from './rename';
import { trash } from './trash';
import { truncate } from './truncate';
import { undelete } from './undelete';
import { trashV19 } from './legacy/v19/trash-steps';

export const OPERATION_STEPS: OperationRegistry = Object.fromEntries(
  [create, trash, adoptTrash, truncate, undelete, purge, rename, hold, trashV19].map((operation) => [
    operation.name,
    operation as OperationRegistry[string],
  ]),
);
