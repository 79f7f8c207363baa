/** Where the project keeps its tools and service data (both git-ignored). */
import { dirname, resolve, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const TOOLS_DIR = resolve(PROJECT_ROOT, '.tools');

export function dataDir(configured: string): string {
  return isAbsolute(configured) ? configured : resolve(PROJECT_ROOT, configured);
}
