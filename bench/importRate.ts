/**
 * Import rate: 50 000 cards with 1 % bad rows posted to POST /v1/cards/import (in-process through
 * Fastify's inject: JSON parsing, validation, batched PostgreSQL writes and the Redis lanes), on a
 * fresh schema and namespace. Run with `npx tsx bench/importRate.ts [--rows n] [--repeat n]`;
 * the first run also warms the process, so the best and the median of the repeats are reported.
 * Each repeat uses new ICCIDs, then re-sends the same file with onExisting=skip (the idempotent
 * re-import) and reports that rate too.
 */
import { parseArgs } from 'node:util';
import { buildApiServer } from '../src/api/server.js';
import { loadConfigOrExit } from '../src/config/index.js';
import { createBenchStack } from './lib/stack.js';

interface Answer {
  readonly accepted: number;
  readonly rejected: unknown[];
  readonly skipped?: unknown[];
}

const { values } = parseArgs({ options: { rows: { type: 'string', default: '50000' }, repeat: { type: 'string', default: '3' } } });
const rows = Number(values.rows);
const repeats = Number(values.repeat);

const iccid = (n: number): string => `8988${String(n).padStart(16, '0')}`;
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const stack = await createBenchStack(loadConfigOrExit(), 'import-rate');
try {
  const app = await buildApiServer({ config: stack.config, deps: stack.deps, services: stack.services, orchestration: stack.ref }, { logLevel: 'warn' });
  const headers = { authorization: `Bearer ${stack.config.API_TOKEN}`, 'content-type': 'application/json' };
  const post = async (payload: string, query = ''): Promise<{ ms: number; answer: Answer }> => {
    const started = performance.now();
    const response = await app.inject({ method: 'POST', url: `/v1/cards/import${query}`, headers, payload });
    const ms = performance.now() - started;
    if (response.statusCode !== 200) throw new Error(`import answered ${response.statusCode}: ${response.body.slice(0, 300)}`);
    return { ms, answer: response.json<Answer>() };
  };
  const carrier = await app.inject({
    method: 'POST',
    url: '/v1/carriers',
    headers,
    payload: JSON.stringify({ name: 'import-rate', gatewayAccount: 'import-rate', groups: [{ name: 'main', qps: 50 }], typeGroups: { card_status: 'main' } }),
  });
  const carrierId = carrier.json<{ id: string }>().id;
  await app.inject({
    method: 'POST',
    url: '/v1/polling-configs',
    headers,
    payload: JSON.stringify({ name: 'import-rate', intervalsSec: { card_status: 3600, carddata: 86_400 } }),
  });

  const fresh: number[] = [];
  const resent: number[] = [];
  for (let run = 0; run < repeats; run += 1) {
    // Every hundredth row is bad (an ICCID that is not one), the rest new cards.
    const file = JSON.stringify(
      Array.from({ length: rows }, (_, i) => (i % 100 === 42 ? { iccid: `bad-${i}`, carrierId } : { iccid: iccid(run * rows + i), carrierId })),
    );
    const first = await post(file);
    const again = await post(file, '?onExisting=skip');
    fresh.push((rows / first.ms) * 1000);
    resent.push((rows / again.ms) * 1000);
    process.stdout.write(
      `run ${run + 1}: ${rows} rows → accepted ${first.answer.accepted}, rejected ${first.answer.rejected.length} in ` +
        `${Math.round(first.ms)} ms (${Math.round(fresh[run]!)} rows/s); ` +
        `re-sent with onExisting=skip: skipped ${again.answer.skipped?.length ?? 0} in ${Math.round(again.ms)} ms (${Math.round(resent[run]!)} rows/s)\n`,
    );
  }
  process.stdout.write(
    `import rate, ${rows} rows with 1 % bad: best ${Math.round(Math.max(...fresh))} rows/s, median ` +
      `${Math.round(median(fresh))} rows/s; re-import (skip): median ${Math.round(median(resent))} rows/s\n`,
  );
  await app.close();
} finally {
  await stack.close();
}
