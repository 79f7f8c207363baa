/** Where the project keeps its tools and service data (both git-ignored). */
import { homedir } from 'node:os';
import { dirname, join, resolve, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const TOOLS_DIR = resolve(PROJECT_ROOT, '.tools');

/**
 * `~/.cache/card-poller` (XDG_CACHE_HOME when set): tools that do not depend on the checkout,
 * shared by every clone of the user (a fresh clone's `npm test` does not install them again): the
 * Temporal server binaries and the chart tools each under a name of their version or pins.
 */
export function userCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME !== '' ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(base, 'card-poller');
}

export function dataDir(configured: string): string {
  return isAbsolute(configured) ? configured : resolve(PROJECT_ROOT, configured);
}
