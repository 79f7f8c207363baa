/**
 * The async-ingest stream consumer tests, unchanged, on the Redis Cluster: the stream, its
 * consumer group and the write counters share the `{ingest}` hash tag, so XADD / XREADGROUP /
 * XAUTOCLAIM / the ack MULTI all reach one node.
 */
import './env.js';
import '../ingest/consumer.test.js';
