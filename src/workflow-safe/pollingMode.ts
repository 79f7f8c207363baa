/** The polling mode (system_config `polling.mode`, switched through pollingControl). Workflow-safe. */

export type PollingMode = 'carrier' | 'legacy';
export const POLLING_MODES: readonly PollingMode[] = ['carrier', 'legacy'];
