/**
 * The API refuses to listen off loopback with the development token: anyone who can reach the
 * address could otherwise use the API with a token printed in the README.
 */
import { DEV_API_TOKEN, type Config } from '../config/index.js';
import { isLoopbackHost } from '../config/loopback.js';

export class UnsafeApiBindingError extends Error {
  constructor(readonly host: string) {
    super(
      `Refusing to start: API_HOST=${host} is not a loopback address and API_TOKEN is the development token; set API_TOKEN to a secret of at least 8 characters (or bind API_HOST to 127.0.0.1)`,
    );
    this.name = 'UnsafeApiBindingError';
  }
}

export function assertSafeApiBinding(config: Pick<Config, 'API_HOST' | 'API_TOKEN'>): void {
  if (config.API_TOKEN === DEV_API_TOKEN && !isLoopbackHost(config.API_HOST)) throw new UnsafeApiBindingError(config.API_HOST);
}
