/**
 * The seed's Lua scripts — those of the Go service this project was derived from — read at run
 * time from the copy kept as a benchmark baseline, bench/lua/seed/carrierqueue-scripts.go.txt (its
 * carrierqueue/scripts.go, flattened; origin in bench/lua/seed/README.md). Scripts are the bodies
 * of its `const <name>Lua = \`…\`` declarations. The seed's claim script spells the card keys itself
 * ('<prefix>' .. cardId .. ':due' / ':claim'); those spellings are read from it too, so the data
 * seeded for it is where it looks.
 *
 * The document is flattened onto one line: a Lua `--` comment, which ends at a line break, would
 * swallow the rest of its script. Such comments are ended where the code resumes (see
 * {@link restoreCommentEnds}); the count is reported, the code itself is left byte for byte.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PROJECT_ROOT } from '../../devstack/paths.js';

const SEED_DIR = resolve(PROJECT_ROOT, 'bench', 'lua', 'seed');
const SEED_DOCUMENT = 'carrierqueue-scripts.go.txt';
const NEEDED = ['claim', 'acquireExec', 'finish'] as const;
export type SeedScriptName = (typeof NEEDED)[number];

export interface SeedScripts {
  readonly file: string;
  readonly scripts: Readonly<Record<SeedScriptName, string>>;
  /** Every script name the document declares (for the report). */
  readonly declared: readonly string[];
  /** Card key layout the claim script hard-codes: `${cardKeyPrefix}<cardId>${dueSuffix}` etc. */
  readonly cardKeyPrefix: string;
  readonly dueSuffix: string;
  readonly claimSuffix: string;
  /** Line breaks put back at comment ends, per script. */
  readonly commentEndsRestored: Readonly<Record<string, number>>;
}

export class SeedDocumentError extends Error {
  override readonly name = 'SeedDocumentError';
}

function findSeedDocument(): string {
  const file = join(SEED_DIR, SEED_DOCUMENT);
  if (!existsSync(file)) throw new SeedDocumentError(`${file} is missing (see bench/lua/seed/README.md)`);
  return file;
}

/**
 * Where code resumes after a flattened comment: whitespace after prose punctuation (any non-ASCII
 * character or ';') followed by another comment or a statement keyword. The seed's comments are
 * Chinese prose, so code never sits right after such a character inside them.
 */
const COMMENT_END = /(?<=[^\x00-\x7F]|;)\s+(?=--\s|(?:local|if|for|while|repeat|return|redis)\s)/;

/** Puts a line break at the end of every `--` comment outside a string literal. */
export function restoreCommentEnds(lua: string): { lua: string; restored: number } {
  let out = '';
  let restored = 0;
  let quote: string | null = null;
  for (let i = 0; i < lua.length; i += 1) {
    const ch = lua[i]!;
    if (quote !== null) {
      if (ch === '\\') {
        out += ch + (lua[i + 1] ?? '');
        i += 1;
        continue;
      }
      if (ch === quote) quote = null;
      out += ch;
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch === '-' && lua[i + 1] === '-') {
      const end = COMMENT_END.exec(lua.slice(i + 2));
      if (!end) return { lua: out + lua.slice(i), restored };
      out += `${lua.slice(i, i + 2 + end.index)}\n`;
      restored += 1;
      i += 1 + end.index + end[0].length;
      continue;
    }
    out += ch;
  }
  return { lua: out, restored };
}

/** The key spelled as `'<prefix>' .. cardId .. '<suffix>'` in the claim script. */
function cardKey(claim: string, suffix: string): { prefix: string; suffix: string } | undefined {
  const match = new RegExp(`'([^']*)'\\s*\\.\\.\\s*cardId\\s*\\.\\.\\s*'(${suffix})'`).exec(claim);
  return match ? { prefix: match[1]!, suffix: match[2]! } : undefined;
}

export function readSeedScripts(file: string = findSeedDocument()): SeedScripts {
  const text = readFileSync(file, 'utf8');
  const found = new Map<string, string>();
  // Markers: a Go raw string assigned to a `…Lua` constant.
  for (const match of text.matchAll(/const (\w+)Lua = `([^`]*)`/g)) found.set(match[1]!, match[2]!);
  const missing = NEEDED.filter((name) => !found.has(name));
  if (missing.length > 0) throw new SeedDocumentError(`${file} lacks the ${missing.map((name) => `${name}Lua`).join(', ')} script(s)`);
  const commentEndsRestored: Record<string, number> = {};
  for (const [name, body] of found) {
    const repaired = restoreCommentEnds(body);
    found.set(name, repaired.lua);
    if (repaired.restored > 0) commentEndsRestored[name] = repaired.restored;
  }
  const claim = found.get('claim')!;
  const due = cardKey(claim, ':due');
  const claimKey = cardKey(claim, ':claim');
  if (!due || !claimKey || due.prefix !== claimKey.prefix)
    throw new SeedDocumentError(`${file}: the claim script's card key spelling ('…' .. cardId .. ':due' / ':claim') was not found`);
  return {
    file,
    scripts: { claim, acquireExec: found.get('acquireExec')!, finish: found.get('finish')! },
    declared: [...found.keys()],
    cardKeyPrefix: due.prefix,
    dueSuffix: due.suffix,
    claimSuffix: claimKey.suffix,
    commentEndsRestored,
  };
}
