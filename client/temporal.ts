/* eslint-disable @typescript-eslint/no-require-imports -- lazy loading (a require: tsx's CommonJS hook, which import() bypasses) */

/**
 * Temporal's SDK, loaded by the first call that needs it: @temporalio/client (with gRPC and the server's protobufs: some
 * 130 to 250 ms of a command's start) is loaded when a call meets the server, and the SDK's modules import it only as
 * types besides this, so that what the catalog answers alone (`config get`, a listing without sizes) never loads it.
 * Its errors are met only after a call to the server: client/errors.ts looks at them through here too.
 */
export const temporalClient = (): typeof import('@temporalio/client') =>
  require('@temporalio/client') as typeof import('@temporalio/client');

/** @temporalio/common (the failures a workflow fails with), as temporalClient. */
export const temporalCommon = (): typeof import('@temporalio/common') =>
  require('@temporalio/common') as typeof import('@temporalio/common');

/** @temporalio/client's internal symbols (a start's request id), as temporalClient. */
export const temporalClientInternals = (): typeof import('@temporalio/client/lib/internal') =>
  require('@temporalio/client/lib/internal') as typeof import('@temporalio/client/lib/internal');
