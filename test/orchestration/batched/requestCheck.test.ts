/**
 * test/orchestration/requestCheck.test.ts again in the batched run shape (CARD_RUN_SHAPE=batch): a
 * whole-system test that applies to both shapes runs in each. A file of its own, so the suite's
 * one pool of test processes schedules it like any other file.
 */
process.env.CARD_RUN_SHAPE = 'batch';
await import('../requestCheck.test.js');
