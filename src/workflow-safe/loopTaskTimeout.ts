/**
 * The workflow task timeout of the long-running loops (pollingControl, carrierScheduler), given at
 * their start and carried over by the server through every continue-as-new.
 *
 * Why not the default 10 s: a loop whose worker dies is picked up by another, which first replays
 * the run's history. A scheduler history near its continue-as-new point (~2 000–2 700 events) took
 * 2.0 s to replay on a quiet 2-core machine and 5.3 s beside a CPU hog (bench/results/replay.md);
 * on a machine half as fast, with the dead worker's other loops replaying beside it, that passed
 * 10 s, so every attempt timed out and the next one replayed again: in a clean-clone CI run the
 * surviving control worker never got the killed one's schedulers going within 300 s
 * (test/cluster/multiProcess.test.ts). The cost of a longer timeout: a task held by a worker that
 * dies mid-task waits this long before another worker gets it (tasks on a dead worker's sticky
 * queue move after 5 s, as before).
 */
export const LOOP_WORKFLOW_TASK_TIMEOUT_MS = 30_000;
