import { InvalidInputError } from '../domain/errors';

/** A port number given on the command line (`flag`), or `fallback` when absent. */
export function portArg(value: string | undefined, fallback: number, flag: string): number {
  if (value === undefined) return fallback;
  const port = Number(value);
  if (!/^[0-9]+$/.test(value) || port < 1 || port > 65535) {
    throw new InvalidInputError(`${flag} must be a port number (1 to 65535), not "${value}"`);
  }
  return port;
}
