import path from 'node:path';
import { catalogPath } from '../domain/deployment';

/** Where each part keeps its files under the state directory: one place, so paths are never guessed. */
export function statePaths(home: string) {
  return {
    catalog: catalogPath(home),
    storage: path.join(home, 'storage'),
    temporalDb: path.join(home, 'temporal.db'),
    temporalLog: path.join(home, 'temporal.log'),
    bin: path.join(home, 'bin'),
  };
}
