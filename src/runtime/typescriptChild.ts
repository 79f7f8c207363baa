/**
 * Node options for a child process that runs TypeScript sources (a `.ts` entry) the way this
 * process runs them: with Node's own type transform and devstack/tsLoader.ts when this process
 * was started so (`npm test`), with tsx otherwise (`npm start`, a developer's `npx tsx`).
 * Only for running from sources: the compiled build (dist/) starts `.js` entries without either.
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const NATIVE_LOADER = new URL('../../devstack/tsLoader.ts', import.meta.url);

/** True when this process loads TypeScript through devstack/tsLoader.ts. */
function runsNativeLoader(): boolean {
  const loaderPath = fileURLToPath(NATIVE_LOADER);
  return process.execArgv.some((arg) => arg.endsWith('tsLoader.ts') || arg === loaderPath || arg === NATIVE_LOADER.href);
}

export function typescriptExecArgv(): string[] {
  if (runsNativeLoader()) return ['--experimental-transform-types', '--disable-warning=ExperimentalWarning', '--import', NATIVE_LOADER.href];
  // tsx resolved from here, so the child's working directory does not matter.
  return ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}
