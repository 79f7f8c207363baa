/**
 * The ingest worker loop (docs/design.md, 'PostgreSQL and records': async). One reader per process
 * takes records from the stream whenever one of `concurrency` writer slots is free, so under load a
 * batch holds whatever arrived — across many executions — while the previous batches were being
 * written, up to `batchSize`; when idle a record is written as soon as it arrives.
 *
 * A batch is acknowledged only after it committed. A retryable failure (database away,
 * deadlock, timeout …) retries the whole batch with backoff, without limit, the batch staying
 * pending in the stream meanwhile; a permanent failure splits the batch into single records, and
 * a record that still cannot be written goes to the dead-letter table with the reason (one whose
 * account was deleted since is written without its alerts instead: src/ingest/missingReference.ts).
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { RedisConnection } from '../redis/connection.js';
import type { Pool } from '../db/pool.js';
import { insertDeadLetter } from './deadLetters.js';
import { deletedAccountLine, settleMissingReference, type MissingReference } from './missingReference.js';
import { backoffMs, classifyWriteFailure } from './failures.js';
import { describeFailure, sqlState } from '../db/errors.js';
import type { IngestMetrics } from './metrics.js';
import { parseIngestRecord, type IngestRecord } from './record.js';
import type { IngestStream, StreamEntry } from './stream.js';
import { writeRecords, type RecordWriterDeps, type WriteResult } from './writer.js';
import { defaultLogger } from '../runtime/logger.js';

export interface IngestConsumerOptions {
  readonly stream: IngestStream;
  /** A connection of its own for the blocking read (closed by stop()). */
  readonly readConnection: RedisConnection;
  readonly writer: RecordWriterDeps;
  /** Batches written at once. */
  readonly concurrency: number;
  readonly batchSize: number;
  /** Entries pending this long without their consumer touching them are taken over. */
  readonly reclaimIdleMs?: number;
  readonly blockMs?: number;
  readonly consumerName?: string;
  readonly metrics?: IngestMetrics;
  readonly log?: (line: string) => void;
  /** Replaces the writer (tests inject failures). */
  readonly write?: (records: readonly IngestRecord[]) => Promise<WriteResult>;
}

interface Batch {
  readonly ids: string[];
  readonly records: IngestRecord[];
  /** Entries that hold no record (unparseable or deleted): dead-lettered or just acknowledged. */
  readonly unreadable: { id: string; payload: string | undefined; reason: string }[];
}

const DEFAULT_RECLAIM_IDLE_MS = 30_000;
const DEFAULT_BLOCK_MS = 1000;
/** Retry backoff cap: short enough that a retrying batch refreshes its idle time well within reclaimIdleMs. */
const MAX_BACKOFF_MS = 5000;
/** A consumer idle this long with nothing pending belongs to a process that is gone. */
const FORGET_CONSUMER_AFTER_MS = 3_600_000;
/** At most one line per this many ms about a failing batch. */
const LOG_EVERY_MS = 10_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function toBatch(entries: readonly StreamEntry[]): Batch {
  const batch: Batch = { ids: [], records: [], unreadable: [] };
  for (const entry of entries) {
    batch.ids.push(entry.id);
    if (entry.payload === undefined) continue;
    try {
      batch.records.push(parseIngestRecord(entry.payload));
    } catch (error) {
      batch.unreadable.push({ id: entry.id, payload: entry.payload, reason: `unreadable record: ${describeFailure(error)}` });
    }
  }
  return batch;
}

export class IngestConsumer {
  readonly name: string;
  private readonly write: (records: readonly IngestRecord[]) => Promise<WriteResult>;
  private readonly reclaimIdleMs: number;
  private readonly blockMs: number;
  private readonly log: (line: string) => void;
  private inflight = 0;
  private slotFreed: (() => void) | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private readonly batches = new Set<Promise<void>>();
  private lastLogAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: IngestConsumerOptions) {
    this.name = options.consumerName ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.write = options.write ?? ((records) => writeRecords(options.writer, records));
    this.reclaimIdleMs = options.reclaimIdleMs ?? DEFAULT_RECLAIM_IDLE_MS;
    this.blockMs = options.blockMs ?? DEFAULT_BLOCK_MS;
    this.log = options.log ?? ((line) => defaultLogger().warn(line));
  }

  start(): void {
    this.loop ??= this.run();
  }

  /**
   * Stops reading and waits for the batches being written; a batch still failing is left pending
   * (another consumer, or this one after a restart, takes it over). Closes the read connection.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.slotFreed?.();
    await this.loop;
    await Promise.allSettled([...this.batches]);
    this.options.readConnection.disconnect();
  }

  private async run(): Promise<void> {
    let nextReclaimAt = 0;
    let readFailures = 0;
    while (!this.stopping) {
      await this.freeSlot();
      if (this.stopping) break;
      let entries: StreamEntry[];
      try {
        if (Date.now() >= nextReclaimAt) {
          await this.options.stream.ensureGroup();
          // Pending entries of consumers that died (or of this one before a restart).
          const reclaimed = await this.options.stream.reclaim(this.name, this.reclaimIdleMs, this.options.batchSize);
          entries = reclaimed.entries;
          if (reclaimed.deleted.length > 0) await this.options.stream.ack(reclaimed.deleted, 0);
          if (reclaimed.cursor === '0-0') {
            nextReclaimAt = Date.now() + this.reclaimIdleMs / 2;
            await this.options.stream.pruneConsumers(FORGET_CONSUMER_AFTER_MS, this.name);
          }
          if (entries.length === 0) entries = await this.options.stream.read(this.options.readConnection, this.name, this.options.batchSize, this.blockMs);
        } else {
          entries = await this.options.stream.read(this.options.readConnection, this.name, this.options.batchSize, this.blockMs);
        }
        readFailures = 0;
      } catch (error) {
        // Redis away: records are safe in the stream (or not yet handed over); try again shortly.
        readFailures += 1;
        this.report(`ingest: reading the stream failed: ${describeFailure(error)}`);
        await sleep(backoffMs(readFailures, { maxMs: MAX_BACKOFF_MS }));
        continue;
      }
      if (entries.length === 0) continue;
      this.inflight += 1;
      const batch = this.process(toBatch(entries)).finally(() => {
        this.inflight -= 1;
        this.batches.delete(batch);
        this.slotFreed?.();
      });
      this.batches.add(batch);
    }
  }

  private async freeSlot(): Promise<void> {
    while (this.inflight >= this.options.concurrency && !this.stopping) {
      await new Promise<void>((resolve) => {
        this.slotFreed = resolve;
      });
      this.slotFreed = undefined;
    }
  }

  private async process(batch: Batch): Promise<void> {
    const started = Date.now();
    let written: WriteResult | 'permanent' | undefined;
    for (let attempt = 1; written === undefined; attempt += 1) {
      try {
        written = await this.write(batch.records);
      } catch (error) {
        if (classifyWriteFailure(error) === 'permanent') {
          written = 'permanent';
          break;
        }
        this.options.metrics?.batchRetried();
        this.report(`ingest: batch of ${batch.records.length} records failed (attempt ${attempt}), retrying: ${describeFailure(error)}`);
        if (this.stopping) return;
        await sleep(backoffMs(attempt, { maxMs: MAX_BACKOFF_MS }));
        if (this.stopping) return;
        await this.options.stream.touch(this.name, batch.ids).catch(() => undefined);
      }
    }
    const recordsWritten = written === 'permanent' ? await this.isolate(batch.records) : written.records;
    if (recordsWritten === undefined) return;
    for (const entry of batch.unreadable) {
      if (!(await this.deadLetter({ recordId: `stream:${entry.id}`, record: entry.payload ?? null, reason: entry.reason }))) return;
    }
    if (!(await this.acknowledge(batch.ids, recordsWritten))) return;
    this.options.metrics?.batchWritten(batch.records.length, recordsWritten, (Date.now() - started) / 1000);
  }

  /**
   * Writes each record of a batch that failed permanently on its own; a record that fails
   * permanently alone is dead-lettered. Returns the records written, or undefined when stopping
   * before everything was settled (the batch stays pending and is taken over later).
   */
  private async isolate(records: readonly IngestRecord[]): Promise<number | undefined> {
    let written = 0;
    for (const record of records) {
      for (let attempt = 1; ; attempt += 1) {
        try {
          written += (await this.write([record])).records;
          break;
        } catch (error) {
          if (classifyWriteFailure(error) === 'permanent') {
            // Its account deleted since (the card moved on): written without its alerts, as sync
            // ingest does. A deleted card's record is a dead letter, like any other that cannot land.
            let settled: MissingReference;
            try {
              settled = await settleMissingReference(this.options.writer, record, error);
            } catch {
              // The database went away meanwhile: the record waits, as a retryable failure does.
              if (this.stopping) return undefined;
              await sleep(backoffMs(attempt, { maxMs: MAX_BACKOFF_MS }));
              continue;
            }
            if (settled === 'written_without_alerts') {
              this.report(deletedAccountLine(record), true);
              written += 1;
              break;
            }
            const code = sqlState(error);
            const letter = {
              recordId: record.recordId,
              cardId: record.cardId,
              carrierId: record.carrierId,
              record,
              reason: describeFailure(error),
              ...(code ? { errorCode: code } : {}),
            };
            if (!(await this.deadLetter(letter))) return undefined;
            break;
          }
          if (this.stopping) return undefined;
          await sleep(backoffMs(attempt, { maxMs: MAX_BACKOFF_MS }));
        }
      }
    }
    return written;
  }

  /** Stores a dead letter, retrying while the database is away; false when stopping first. */
  private async deadLetter(letter: Parameters<typeof insertDeadLetter>[1]): Promise<boolean> {
    const pool: Pool = this.options.writer.pool;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await insertDeadLetter(pool, letter);
        this.options.metrics?.deadLettered();
        this.report(`ingest: record ${letter.recordId} dead-lettered: ${letter.reason}`, true);
        return true;
      } catch (error) {
        if (this.stopping) return false;
        this.report(`ingest: writing a dead letter failed (attempt ${attempt}): ${describeFailure(error)}`);
        await sleep(backoffMs(attempt, { maxMs: MAX_BACKOFF_MS }));
      }
    }
  }

  /** Acknowledges after the commit; a failed ack (Redis away) is retried — redelivery would be harmless, but slow. */
  private async acknowledge(ids: readonly string[], written: number): Promise<boolean> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.options.stream.ack(ids, written);
        return true;
      } catch (error) {
        if (this.stopping) return false;
        this.report(`ingest: acknowledging a committed batch failed (attempt ${attempt}): ${describeFailure(error)}`);
        await sleep(backoffMs(attempt, { maxMs: MAX_BACKOFF_MS }));
      }
    }
  }

  private report(line: string, always = false): void {
    const now = Date.now();
    if (!always && now - this.lastLogAt < LOG_EVERY_MS) return;
    if (!always) this.lastLogAt = now;
    this.log(line);
  }
}
