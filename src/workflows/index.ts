/** The workflows registered on the workers (workflow bundle entry point). */
export { pollingControl } from './pollingControl.js';
export { carrierScheduler } from './carrierScheduler.js';
export { cardCheck } from './cardCheck.js';
export { cardBatch } from './cardBatch.js';
export { storageMaintenance } from './storageMaintenance.js';
