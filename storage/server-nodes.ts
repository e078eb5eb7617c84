import { InvalidShardRefError } from './errors';

/**
 * The nodes of a driver whose nodes are database servers, each by its handle (a pool, or what wraps one), made ready
 * for tablefate (its own record made) on first use, once; a preparation that failed is tried again at the next use.
 */
export class ServerNodes<T> {
  readonly names: readonly string[];
  private readonly byNode = new Map<string, { handle: T; ready?: Promise<void> }>();

  constructor(
    handles: ReadonlyArray<{ node: string; handle: T }>,
    private readonly prepare: (handle: T) => Promise<void>,
  ) {
    this.names = handles.map((h) => h.node);
    for (const { node, handle } of handles) this.byNode.set(node, { handle });
  }

  /** The node's handle as it is, not made ready (for a look that must make nothing); none for a node not of these. */
  handleOf(node: string): T | undefined {
    return this.byNode.get(node)?.handle;
  }

  /** The node's handle, made ready. */
  async ready(node: string): Promise<T> {
    const found = this.byNode.get(node);
    if (!found) throw new InvalidShardRefError(`node ${node} is not one of this driver's (${this.names.join(', ')})`);
    found.ready ??= this.prepare(found.handle).catch((err: unknown) => {
      found.ready = undefined;
      throw err;
    });
    await found.ready;
    return found.handle;
  }

  /** Every node's handle. */
  all(): T[] {
    return [...this.byNode.values()].map((n) => n.handle);
  }
}
