/**
 * `promtool` (checks and unit-tests the Prometheus alert rules) from Debian's `prometheus` package.
 *
 * Installing the package would pull eleven JavaScript packages for the server's web UI and start a
 * Prometheus server from its post-install script; only the one static binary is needed, so the
 * package is downloaded and promtool alone is extracted into `~/.cache/card-poller/promtool/` (one download of
 * about 19 MB, 46 MB kept). A `promtool` already on the PATH is used as it is.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { execFileAsync } from './process.js';
import { userCacheDir } from './paths.js';

/** In the user's cache (devstack/paths.ts): every clone uses the one extracted binary. */
const PROMTOOL_DIR = join(userCacheDir(), 'promtool');
export const PROMTOOL_PATH = join(PROMTOOL_DIR, 'promtool');

async function onPath(binary: string): Promise<string | undefined> {
  try {
    const { stdout } = await execFileAsync('sh', ['-c', `command -v ${binary}`]);
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

async function download(dir: string, env: NodeJS.ProcessEnv): Promise<void> {
  await execFileAsync('apt-get', ['download', '-qq', 'prometheus'], { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 });
}

export async function ensurePromtool(log: (line: string) => void): Promise<string> {
  const found = (await onPath('promtool')) ?? (existsSync(PROMTOOL_PATH) ? PROMTOOL_PATH : undefined);
  if (found) return found;
  log(`extracting promtool from Debian's prometheus package into ${PROMTOOL_PATH}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  mkdirSync(PROMTOOL_DIR, { recursive: true });
  // A directory of our own, so that two processes installing at once do not mix their files.
  const work = mkdtempSync(join(PROMTOOL_DIR, '.download-'));
  try {
    try {
      await download(work, env);
    } catch {
      // No package list yet (a fresh image): read it, then try once more.
      await execFileAsync('apt-get', ['update', '-qq'], { env, maxBuffer: 64 * 1024 * 1024 });
      await download(work, env);
    }
    const { stdout } = await execFileAsync('sh', ['-c', 'ls *.deb'], { cwd: work });
    const deb = stdout.trim().split('\n')[0];
    if (!deb) throw new Error('apt-get download prometheus left no .deb file');
    await execFileAsync('dpkg', ['-x', deb, 'root'], { cwd: work });
    const staged = join(work, 'promtool');
    copyFileSync(join(work, 'root', 'usr', 'bin', 'promtool'), staged);
    // rename is atomic: a concurrent caller sees either no binary or the whole one.
    renameSync(staged, PROMTOOL_PATH);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return PROMTOOL_PATH;
}
