/** What the container files run: compose `command`s and the Dockerfile `CMD`, read as the runtime would. */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export const ROOT = new URL('../../', import.meta.url);

export interface ComposeService {
  readonly image?: string;
  readonly build?: unknown;
  readonly command?: readonly string[] | string;
  readonly entrypoint?: readonly string[] | string;
  readonly environment?: Record<string, string | number | boolean | null>;
  readonly ports?: readonly string[];
  readonly depends_on?: Record<string, { condition: string }> | readonly string[];
  readonly healthcheck?: { test?: readonly string[] | string; disable?: boolean };
  readonly restart?: string;
}

export interface Compose {
  readonly services: Record<string, ComposeService>;
}

export function readCompose(): Compose {
  // `merge: true` resolves the `<<: *anchor` keys the way Docker Compose does.
  return parse(readFileSync(new URL('docker-compose.yml', ROOT), 'utf8'), { merge: true }) as Compose;
}

export function readDockerfile(): string {
  return readFileSync(new URL('Dockerfile', ROOT), 'utf8');
}

/** The exec-form CMD of the last stage (the image's default command). */
export function dockerfileCmd(dockerfile: string): string[] {
  const cmds = [...dockerfile.matchAll(/^CMD\s+(\[.*\])\s*$/gm)].map((m) => JSON.parse(m[1] ?? '[]') as string[]);
  const last = cmds.at(-1);
  if (!last) throw new Error('Dockerfile has no exec-form CMD');
  return last;
}

/** Services built from this repository (they run our entries). */
export function appServices(compose: Compose): [string, ComposeService][] {
  return Object.entries(compose.services).filter(([, service]) => service.build !== undefined);
}

/** `node <script>` → the script path relative to the image's working directory (the project root). */
export function nodeEntry(command: readonly string[] | string | undefined): string {
  const argv = typeof command === 'string' ? command.split(/\s+/) : [...(command ?? [])];
  if (argv[0] !== 'node' || !argv[1]) throw new Error(`expected "node <script>", got ${JSON.stringify(command)}`);
  return argv[1];
}
