/**
 * The Temporal dev server the jest global setup starts for the whole run (see global-setup.ts).
 * Tests that need a server of their own (restarts, a db of their own) start a DevServer themselves;
 * TEMPORAL_CLI_PATH is set, so they reuse the binary the setup found.
 */

/** The gRPC address (`127.0.0.1:<port>`) of the shared test server. */
export function testServerAddress(): string {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    throw new Error('TEMPORAL_ADDRESS is not set: run the tests with jest, whose global setup starts the Temporal dev server');
  }
  return address;
}

/** The namespace of the shared test server (`default`). */
export function testNamespace(): string {
  return process.env.TEMPORAL_NAMESPACE ?? 'default';
}
