/**
 * The rate limiter tests, unchanged, on the Redis Cluster (test clock, Redis TIME wait mode,
 * pushback, and four caller processes sharing one group: they inherit REDIS_CLUSTER_NODES).
 */
import './env.js';
import '../gateway/limiter.test.js';
