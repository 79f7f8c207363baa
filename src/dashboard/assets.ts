/**
 * The dashboard's static files (HTML, one ES module per job, CSS), read once at start-up and served
 * from memory: no build step and no file system access per request.
 */
import { access, readFile } from 'node:fs/promises';

export interface Asset {
  readonly path: string;
  readonly contentType: string;
  readonly body: string;
}

/** URL path → file in public/. */
const FILES: readonly { path: string; file: string; contentType: string }[] = [
  { path: '/dashboard', file: 'index.html', contentType: 'text/html; charset=utf-8' },
  { path: '/dashboard/app.js', file: 'app.js', contentType: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/api.js', file: 'api.js', contentType: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/charts.js', file: 'charts.js', contentType: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/dom.js', file: 'dom.js', contentType: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/cardPanel.js', file: 'cardPanel.js', contentType: 'text/javascript; charset=utf-8' },
  { path: '/dashboard/app.css', file: 'app.css', contentType: 'text/css; charset=utf-8' },
];

/**
 * Next to this module when run from source; a compiled copy (dist/src/dashboard) reads the
 * sources' public/ folder, which holds no TypeScript to compile.
 */
const CANDIDATE_DIRS = [new URL('./public/', import.meta.url), new URL('../../../src/dashboard/public/', import.meta.url)];

async function publicDir(): Promise<URL> {
  for (const dir of CANDIDATE_DIRS) {
    try {
      await access(new URL('index.html', dir));
      return dir;
    } catch {
      // Try the next location.
    }
  }
  throw new Error(`dashboard files not found in ${CANDIDATE_DIRS.map((dir) => dir.pathname).join(' or ')}`);
}

export async function loadAssets(): Promise<Asset[]> {
  const dir = await publicDir();
  return Promise.all(FILES.map(async ({ path, file, contentType }) => ({ path, contentType, body: await readFile(new URL(file, dir), 'utf8') })));
}
