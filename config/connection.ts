import fs from 'node:fs';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow';
import { z } from 'zod';
import { InvalidInputError } from '../domain/errors';

/**
 * How to reach a secured Temporal server (Temporal Cloud, a self-hosted mTLS cluster): the variables the
 * official `temporal` CLI reads, so that one environment serves both. Secrets come from files (the client
 * certificate's key, the API key) or the environment (the API key); they are read here, once, and never logged.
 */
export const temporalSecurityEnvSchema = z.object({
  /** `true` for TLS with the system's roots; implied by any of the settings below but TEMPORAL_TLS=false. */
  TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
  TEMPORAL_TLS_CLIENT_CERT_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_CLIENT_KEY_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  TEMPORAL_API_KEY_PATH: z.string().min(1).optional(),
});

export type TemporalSecurityEnv = z.infer<typeof temporalSecurityEnvSchema>;

/** The connection options both the SDK's Connection and the worker's NativeConnection take. */
export interface TemporalSecurity {
  tls?: TLSConfig;
  apiKey?: string;
}

/** Reads the secured-connection settings; a file that cannot be read or a half-given pair is an InvalidInputError. */
export function temporalSecurity(e: TemporalSecurityEnv): TemporalSecurity {
  if ((e.TEMPORAL_TLS_CLIENT_CERT_PATH === undefined) !== (e.TEMPORAL_TLS_CLIENT_KEY_PATH === undefined)) {
    throw new InvalidInputError(
      'invalid configuration: TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH go together (a client certificate and its key)',
    );
  }
  if (e.TEMPORAL_API_KEY !== undefined && e.TEMPORAL_API_KEY_PATH !== undefined) {
    throw new InvalidInputError('invalid configuration: give TEMPORAL_API_KEY or TEMPORAL_API_KEY_PATH, not both');
  }
  const apiKey =
    e.TEMPORAL_API_KEY ??
    (e.TEMPORAL_API_KEY_PATH ? read('TEMPORAL_API_KEY_PATH', e.TEMPORAL_API_KEY_PATH).toString('utf8').trim() : undefined);
  const anyTls =
    e.TEMPORAL_TLS_CLIENT_CERT_PATH !== undefined ||
    e.TEMPORAL_TLS_SERVER_CA_CERT_PATH !== undefined ||
    e.TEMPORAL_TLS_SERVER_NAME !== undefined;
  // An API key travels over TLS only (Temporal Cloud's rule): it implies TLS unless switched off explicitly.
  const useTls = e.TEMPORAL_TLS === 'true' || (e.TEMPORAL_TLS !== 'false' && (anyTls || apiKey !== undefined));
  if (!useTls) {
    if (anyTls) throw new InvalidInputError('invalid configuration: TEMPORAL_TLS=false, but TLS settings are given');
    return apiKey === undefined ? {} : { apiKey };
  }
  const tls: TLSConfig = {};
  if (e.TEMPORAL_TLS_SERVER_NAME) tls.serverNameOverride = e.TEMPORAL_TLS_SERVER_NAME;
  if (e.TEMPORAL_TLS_SERVER_CA_CERT_PATH)
    tls.serverRootCACertificate = read('TEMPORAL_TLS_SERVER_CA_CERT_PATH', e.TEMPORAL_TLS_SERVER_CA_CERT_PATH);
  if (e.TEMPORAL_TLS_CLIENT_CERT_PATH && e.TEMPORAL_TLS_CLIENT_KEY_PATH) {
    tls.clientCertPair = {
      crt: read('TEMPORAL_TLS_CLIENT_CERT_PATH', e.TEMPORAL_TLS_CLIENT_CERT_PATH),
      key: read('TEMPORAL_TLS_CLIENT_KEY_PATH', e.TEMPORAL_TLS_CLIENT_KEY_PATH),
    };
  }
  return apiKey === undefined ? { tls } : { tls, apiKey };
}

/** A secret or certificate file; the error names the variable and the path, never the content. */
function read(variable: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new InvalidInputError(
      `invalid configuration: ${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}
