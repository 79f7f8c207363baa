/**
 * The Lua script tests, unchanged, on the Redis Cluster: their fixture (test/lua/fixture.ts →
 * testkit/redis.ts) connects to the cluster when REDIS_CLUSTER_NODES is set, so every script
 * runs by EVALSHA on the node owning its account's slot, accounts spread over the masters.
 *
 * Left out: test/lua/move.test.ts, whose observer reads two accounts' lanes in one MULTI to prove
 * a moving card is never seen in both. Two accounts are two slots: a cluster refuses that MULTI
 * (CROSSSLOT), which is why a move is two steps in the first place (docs/design.md, 'Lifecycle').
 */
import './env.js';
import '../lua/claim.test.js';
import '../lua/finish.test.js';
import '../lua/lease.test.js';
import '../lua/requestCheck.test.js';
import '../lua/clock.test.js';
import '../lua/model.test.js';
