/**
 * ceiling: what the engine itself allows on this machine, measured in the same invocation as the
 * scenarios that refer to it — (a) the dev server's cheapest workflow (client-started, no
 * activity): workflows/s and server CPU per workflow; (b) the card-execution shape (the throughput
 * workload through the whole stack, single type, the configured start mode): executions/s.
 * throughput reads its executions/s as a ratio to (a); the load scenarios size from (b) when
 * throughput did not run.
 */
import { windowSeconds, type Scenario } from '../lib/context.js';
import { measureNoopCeiling } from '../lib/noopCeiling.js';
import { measureCardExecutions } from '../lib/cardExecutions.js';
import { cpuNote } from '../lib/window.js';
import { round } from '../lib/stats.js';
import { THROUGHPUT_CONFIG } from './throughputLoad.js';

export const ceiling: Scenario = async (context) => {
  const noopSeconds = windowSeconds(context, { warmupSec: 5, durationSec: 20 });
  const cardSeconds = windowSeconds(context, { warmupSec: 20, durationSec: 30 });
  const noop = await measureNoopCeiling(context.config, noopSeconds, context.log);
  context.measured.noop = noop;
  const startMode = context.config.CARD_START_MODE;
  const card = await measureCardExecutions(context, { startMode, shape: 'single', runShape: context.config.CARD_RUN_SHAPE, ...cardSeconds }, 'card shape');
  context.measured.cardRuns.push({ ...card, source: 'ceiling' });
  const ratio = noop.workflowsPerSecond > 0 ? round(card.executionsPerSecond / noop.workflowsPerSecond, 3) : null;
  return {
    title: "the engine's ceiling: cheapest workflow and card-execution shape",
    explain: [
      `No-activity workflow: bench/workflows/noop.ts started with the client by ${noop.settings.startConcurrency} ` +
        `concurrent starters, at most ${noop.settings.maxOutstanding} started and not completed; completions counted ` +
        `in the worker (a sink: no extra event or RPC).`,
      `Card execution: the throughput workload (${THROUGHPUT_CONFIG.accounts} accounts × ` +
        `${THROUGHPUT_CONFIG.cardsPerAccount} cards due every ${THROUGHPUT_CONFIG.intervalSec} s, one gateway type, ` +
        `budgets far above the executor) through carrierScheduler → cardCheck (${startMode} starts) → gateway → ` +
        `PostgreSQL records.`,
      'CPU ms per workflow/execution: process CPU in the window ÷ completions. History events and workflow tasks: ' +
        'means over a sample of completed runs (fetchHistory).',
    ],
    config: { noop: { ...noopSeconds, ...noop.settings }, card: { ...cardSeconds, startMode, ...card.settings } },
    results: { noop, card, cardToNoopRatio: ratio },
    tables: [
      {
        headers: ['workflow', 'completed/s', 'history events', 'workflow tasks', 'Temporal CPU ms each', 'this process CPU ms each', 'ratio to no-activity'],
        numeric: [false, true, true, true, true, true, true],
        rows: [
          [
            'no activity, client start',
            noop.workflowsPerSecond,
            noop.history.events.mean,
            noop.history.workflowTasks.mean,
            noop.temporalCpuMsPerWorkflow,
            noop.benchCpuMsPerWorkflow,
            1,
          ],
          [
            `card execution, 1 type, ${startMode} start`,
            card.executionsPerSecond,
            card.history.events.mean,
            card.history.workflowTasks.mean,
            card.cost.cpuMsPerExecution.temporal,
            card.cost.cpuMsPerExecution.bench,
            ratio ?? '–',
          ],
        ],
      },
    ],
    verdicts: [],
    notes: [
      `The no-activity workflow is the most a card execution could approach on this server: the card path reached ` +
        `${ratio === null ? '–' : `${round(ratio * 100, 1)} %`} of it.`,
      `No-activity window: ${cpuNote(noop.cpuShares)}`,
      `Card window: ${cpuNote(card.cpuShares)}`,
    ],
  };
};
