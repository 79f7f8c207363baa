/**
 * Workflow code with a deliberately changed command sequence (a timer before the first command
 * the recorded runs issued), the kind of change that wedges running
 * runs after a deploy: the replay test checks that replaying the recorded histories against it
 * fails, so its passing run means something. Bundled on its own, never registered on a worker.
 */
import { sleep } from '@temporalio/workflow';
import { cardCheck as currentCardCheck, type CardCheckArgs } from '../../src/workflows/cardCheck.js';
import { carrierScheduler as currentCarrierScheduler, type CarrierSchedulerArgs } from '../../src/workflows/carrierScheduler.js';
import { pollingControl as currentPollingControl, type PollingControlArgs } from '../../src/workflows/pollingControl.js';

export { cardBatch } from '../../src/workflows/cardBatch.js';
export { storageMaintenance } from '../../src/workflows/storageMaintenance.js';

/**
 * A timer before the card's first step. (Moving the search-attribute upsert from last to first is
 * not caught: the SDK replays upserts leniently, and they change nothing the run decides.)
 */
export async function cardCheck(args: CardCheckArgs): ReturnType<typeof currentCardCheck> {
  await sleep(1);
  return currentCardCheck(args);
}

/** A timer before the first claim round (the workflow loop's, and the activity loop's hand-over). */
export async function carrierScheduler(args: CarrierSchedulerArgs): ReturnType<typeof currentCarrierScheduler> {
  await sleep(1);
  return currentCarrierScheduler(args);
}

/** A timer before the mode read. */
export async function pollingControl(args: PollingControlArgs): ReturnType<typeof currentPollingControl> {
  await sleep(1);
  return currentPollingControl(args);
}
