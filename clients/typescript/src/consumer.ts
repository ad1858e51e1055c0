/**
 * Consumer helpers: at-least-once delivery with exactly-once effect (design section 6).
 *
 * RMS delivers every message at least once: a record can come twice because RMS re-published
 * it (no ack in time), because Kafka redelivered it after a restart, or because an operator
 * resent it. {@link RmsConsumer} makes the effect happen once:
 *
 * 1. it reads the `rms-message-id` header of each record ({@link parseRecord});
 * 2. in one transaction of the consumer's PostgreSQL database it inserts the id into the
 *    inbox table and runs the handler with the same client ({@link Inbox}); an id already
 *    there is a redelivery and the handler is skipped; a handler that throws rolls the inbox
 *    row back too, so the message is processed again when it comes again;
 * 3. after that commit it acknowledges the message to RMS ({@link HttpAcker} or a signed
 *    record on the ack topic, {@link TopicAcker}), a skipped duplicate too (the first ack
 *    may have been lost);
 * 4. then it commits the Kafka offset. A crash before that makes Kafka deliver the record
 *    again, and the inbox makes that harmless.
 *
 * A handler that throws is neither acked nor retried in place: RMS re-publishes the message
 * when its ack deadline passes, so one bad message never blocks its partition.
 *
 * Several apps may consume one topic, and a message is done when each of them acked it. The
 * consumer acks as its own `app`. A record whose `rms-awaiting` header does not name it is a
 * redelivery for the others (this app acked already): it is skipped, neither handled nor
 * acked, reported with the outcome `not-awaited`, and committed past. A record without the
 * header, or with one that cannot be read, is handled.
 */
import { context, SpanKind, trace, type Context } from "@opentelemetry/api";
import kafkajs, { type Consumer, type Kafka, type KafkaMessage, type Producer } from "kafkajs";
import type { Pool, PoolClient } from "pg";

import { awaitingOf, awaits, isAppName } from "./awaiting.js";
import { checkedName } from "./barrier.js";
import { RmsError, RmsUnavailableError } from "./errors.js";
import { signedHeaders } from "./signing.js";
import { contextFromHeaders, traceHeaders } from "./trace.js";
import { Transport, type RetryOptions } from "./transport.js";
import { appOfKey, checkApp } from "./whoami.js";

export const HEADER_MESSAGE_ID = "rms-message-id";
export const HEADER_APP = "rms-app";
export const HEADER_DELIVERY = "rms-delivery";
export const HEADER_CREATED_AT = "rms-created-at";
export const DEFAULT_ACK_TOPIC = "rms.acks";
export const DEFAULT_INBOX_TABLE = "rms_inbox";
const tracer = trace.getTracer("rms-client");

// ---- records ---------------------------------------------------------------------------------

/** A consumed RMS record with its headers decoded. */
export interface RmsRecord {
  messageId: string;
  /** `rms-delivery`: 1 for the first publish, 2 for the first redelivery, ... (0 if absent). */
  delivery: number;
  app: string | null;
  createdAt: string | null;
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  /** The JSON-decoded value (the message's payload); the raw bytes when not JSON. */
  payload: unknown;
  /** Every header as text (repeated headers: the last value). */
  headers: Record<string, string>;
  /** The `rms-awaiting` header's app names: null when the record has none or it cannot be
   * read (see {@link recordAwaits}). */
  awaiting: string[] | null;
}

/** Whether the record is for `app`: false only when its `rms-awaiting` header was read and
 * does not name it (`app` acknowledged the message already). */
export function recordAwaits(record: Pick<RmsRecord, "awaiting">, app: string): boolean {
  return awaits(record.awaiting, app);
}

/** The record's headers as text; a header without a value is the empty string. */
export function recordHeaders(message: Pick<KafkaMessage, "headers">): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, raw] of Object.entries(message.headers ?? {})) {
    const last = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    headers[name] = last === undefined || last === null ? "" : last.toString();
  }
  return headers;
}

/** RMS's message-id pattern; ids a path would rewrite are reserved. */
const MESSAGE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const RESERVED_IDS = new Set(["batch", "send", ".", ".."]);

/** The RMS record, or null for a record that cannot be one (no valid `rms-message-id`) or
 * cannot be read. Never throws, whatever the record holds: the consumer sets it aside. */
export function parseRecord(topic: string, partition: number,
                            message: Pick<KafkaMessage, "headers" | "key" | "value" | "offset">): RmsRecord | null {
  try {
    return readRecord(topic, partition, message);
  } catch {
    return null;
  }
}

function readRecord(topic: string, partition: number,
                    message: Pick<KafkaMessage, "headers" | "key" | "value" | "offset">): RmsRecord | null {
  const headers = recordHeaders(message);
  const messageId = headers[HEADER_MESSAGE_ID];
  if (!messageId || !MESSAGE_ID.test(messageId) || RESERVED_IDS.has(messageId)) return null;
  const delivery = headers[HEADER_DELIVERY] ?? "";
  let payload: unknown = message.value;
  if (message.value !== null) {
    try {
      payload = JSON.parse(message.value.toString("utf8"));
    } catch {
      payload = message.value;
    }
  }
  return {
    messageId,
    delivery: /^[0-9]{1,9}$/.test(delivery) ? Number(delivery) : 0,
    app: headers[HEADER_APP] ?? null,
    createdAt: headers[HEADER_CREATED_AT] ?? null,
    topic,
    partition,
    offset: message.offset,
    key: message.key ?? null,
    payload,
    headers,
    awaiting: awaitingOf(message.headers),
  };
}

// ---- the inbox -------------------------------------------------------------------------------

export type Handler = (client: PoolClient, record: RmsRecord) => Promise<void>;

export type ProcessResult =
  | { outcome: "processed" }
  | { outcome: "duplicate" }
  | { outcome: "failed"; error: unknown }
  /** The record's `rms-awaiting` header does not name the consumer's app: not handled, not
   * acked (the consumer decides this before the inbox). */
  | { outcome: "not-awaited" };

/** The inbox table's definition, for your own migrations. */
export function inboxDdl(table: string = DEFAULT_INBOX_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${checkedName(table)} (
  message_id text PRIMARY KEY,
  topic text NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
)`;
}

/** Runs a handler at most once per message id, in one transaction with the inbox row. One
 * inbox table serves one handler: two effects of the same message need two tables. */
export class Inbox {
  readonly table: string;

  constructor(private readonly pool: Pool, options: { table?: string } = {}) {
    this.table = checkedName(options.table ?? DEFAULT_INBOX_TABLE);
  }

  async ensure(): Promise<void> {
    await this.pool.query(inboxDdl(this.table));
  }

  async process(record: RmsRecord, handler: Handler): Promise<ProcessResult> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const claimed = await client.query(
        `INSERT INTO ${this.table} (message_id, topic) VALUES ($1, $2)
         ON CONFLICT (message_id) DO NOTHING RETURNING message_id`, [record.messageId, record.topic]);
      if (!claimed.rowCount) {
        await client.query("ROLLBACK");
        return { outcome: "duplicate" };
      }
      await handler(client, record);
      await client.query("COMMIT");
      return { outcome: "processed" };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      return { outcome: "failed", error };
    } finally {
      client.release();
    }
  }
}

// ---- acknowledgements ------------------------------------------------------------------------

export interface AckResult {
  messageId: string;
  /** `acked`: RMS (or the ack topic) has it; `refused`: RMS said no for good; `failed`: not
   * reachable, RMS will redeliver and the ack is sent again then. */
  result: "acked" | "refused" | "failed";
  status?: number | null;
  detail?: string;
}

/** What an ack names: a record (its `messageId`, and its `createdAt`, the `rms-created-at`
 * header as it came, which binds an ack record to that instance of the id), or an id alone. */
export type AckTarget = string | { messageId: string; createdAt?: string | null };

function targetOf(target: AckTarget): { messageId: string; createdAt: string | null } {
  return typeof target === "string" ? { messageId: target, createdAt: null }
    : { messageId: target.messageId, createdAt: target.createdAt ?? null };
}

export interface Acker {
  /** Acknowledges a record's message (an {@link RmsRecord} will do); `trace`: the W3C
   * headers to carry (`traceparent`, `tracestate`). */
  ack(target: AckTarget, trace?: Record<string, string>): Promise<AckResult>;
  close(): Promise<void>;
}

/** `POST /v1/messages/{id}/ack` with the consumer app's API key, retried like every call. An
 * HTTP ack is authenticated with the app's key when it is made, so it cannot be replayed from
 * a log: the record's `createdAt` is not needed and not sent. */
export class HttpAcker implements Acker {
  private readonly http: Transport;

  constructor(options: { baseUrl: string; apiKey: string; retry?: RetryOptions; timeoutMs?: number }) {
    this.http = new Transport(options);
  }

  async ack(target: AckTarget, trace: Record<string, string> = {}): Promise<AckResult> {
    const { messageId } = targetOf(target);
    try {
      await this.http.call("POST", `/v1/messages/${encodeURIComponent(messageId)}/ack`, undefined, trace);
      return { messageId, result: "acked", status: 200 };
    } catch (error) {
      if (!(error instanceof RmsError)) throw error;
      const result = error instanceof RmsUnavailableError ? "failed" : "refused";
      return { messageId, result, status: error.status, detail: error.detail };
    }
  }

  /** The app this acker's API key acts as (`GET /v1/apps/me`); null when RMS cannot tell. */
  async appOfKey(): Promise<string | null> {
    return appOfKey(() => this.http.call<{ name?: unknown }>("GET", "/v1/apps/me"));
  }

  async close(): Promise<void> {}
}

export interface TopicAckerOptions {
  /** The app RMS knows the consumer by (its `consume_topics` cover the message's topic). */
  consumerApp: string;
  /** That app's signing secret (`whsec_...`); during a rotation overlap, both. */
  signingSecret: string | string[];
  ackTopic?: string;
  /** A connected producer to reuse, or a Kafka client to make one from. */
  producer?: Producer;
  kafka?: Kafka;
}

const NO_CREATED_AT = "an ack record needs the acknowledged record's rms-created-at header; ack this one over HTTP";

/** The ack value as written: `{"message_id", "consumer", "created_at"}`, where `createdAt` is
 * the acknowledged record's `rms-created-at` header as it came. Throws without it: RMS refuses
 * an ack record that names no instance. */
export function ackValue(messageId: string, consumer: string, createdAt: string | null): string {
  if (!createdAt) throw new TypeError(NO_CREATED_AT);
  return JSON.stringify({ message_id: messageId, consumer, created_at: createdAt });
}

/**
 * A record `{"message_id", "consumer", "created_at"}` on the ack topic, signed with the
 * consumer app's signing secret in Standard Webhooks headers over the value exactly as written
 * (design section 6). `created_at` is the acknowledged record's `rms-created-at`: RMS applies
 * the ack only to the message with that id and that creation time, so a replayed record, or
 * one read after the id was freed and used again, never finishes a newer message. RMS applies
 * it asynchronously: `acked` means the broker holds it.
 */
export class TopicAcker implements Acker {
  /** The app this acker signs ack records for. */
  readonly consumerApp: string;
  private readonly secrets: string[];
  private readonly topic: string;
  private readonly producer: Producer;
  private readonly owned: boolean;
  private connecting: Promise<void> | null;

  constructor(private readonly options: TopicAckerOptions) {
    this.consumerApp = options.consumerApp;
    this.secrets = typeof options.signingSecret === "string" ? [options.signingSecret] : options.signingSecret;
    signedHeaders(this.secrets, ""); // a malformed secret fails here, not at the first ack
    this.topic = options.ackTopic ?? DEFAULT_ACK_TOPIC;
    if (options.producer) {
      this.producer = options.producer;
      this.owned = false;
      this.connecting = Promise.resolve();
    } else if (options.kafka) {
      this.producer = options.kafka.producer({ allowAutoTopicCreation: false,
                                                 createPartitioner: kafkajs.Partitioners.DefaultPartitioner });
      this.owned = true;
      this.connecting = null;
    } else {
      throw new TypeError("TopicAcker needs a producer or a kafka client");
    }
  }

  async ack(target: AckTarget, trace: Record<string, string> = {}): Promise<AckResult> {
    const { messageId, createdAt } = targetOf(target);
    if (!createdAt) return { messageId, result: "refused", detail: NO_CREATED_AT }; // nothing written
    const value = ackValue(messageId, this.options.consumerApp, createdAt);
    const headers = { ...signedHeaders(this.secrets, value), ...trace };
    try {
      this.connecting ??= this.producer.connect();
      await this.connecting;
      await this.producer.send({ topic: this.topic, acks: -1, messages: [{ key: messageId, value, headers }] });
    } catch (error) {
      this.connecting = this.owned ? null : this.connecting;
      return { messageId, result: "failed", status: null, detail: String(error) };
    }
    return { messageId, result: "acked" };
  }

  async close(): Promise<void> {
    if (this.owned && this.connecting) await this.producer.disconnect().catch(() => undefined);
  }
}

// ---- the consumer ----------------------------------------------------------------------------

export interface ConsumerEvent {
  record: RmsRecord;
  process: ProcessResult;
  ack: AckResult | null;
}

export interface RmsConsumerOptions {
  /** The name RMS knows this consumer app by; may be left out with a {@link TopicAcker},
   * which names it. */
  app?: string;
  kafka: Kafka;
  /** The Kafka consumer group (default: the app's name). Each consumer app needs a group of its
   * own: Kafka gives each partition to one member of a group, so an app sharing a group with
   * another misses the records Kafka gives the other's members (a warning says so). */
  groupId?: string;
  topics: Array<string | RegExp>;
  inbox: Inbox;
  handler: Handler;
  acker: Acker;
  /** Read a new group's topics from the beginning (default true). */
  fromBeginning?: boolean;
  /** Signals (e.g. `["SIGTERM"]`) on which the consumer stops, leaving its group, then raises the signal again (the
   * process ends as it would have; give it only when the process has no other listener for them). A process that ends
   * without leaving holds its partitions for the group's session timeout (30 s), and kafkajs has no static membership. */
  stopOnSignals?: NodeJS.Signals[];
  /** Told about every RMS record once it is handled and acked, or skipped as `not-awaited`
   * (without it, a skip is logged with `console.info`). */
  onRecord?: (event: ConsumerEvent) => void;
  /** Told about every record set aside (committed past without handling): one that cannot be
   * RMS's, or whose handling threw. Without it, a warning is logged. */
  onSetAside?: (setAside: SetAside) => void;
}

/** A record the consumer committed past without handling it, and why. */
export interface SetAside {
  topic: string;
  partition: number;
  offset: string;
  reason: string;
}

/** Kafka records → inbox + handler (one transaction) → ack → offset commit, one record at a
 * time per partition. */
export class RmsConsumer {
  /** The app this consumer acks as. */
  readonly app: string;
  /** The Kafka consumer group it joins. */
  readonly groupId: string;
  private readonly consumer: Consumer;

  /** Throws a `TypeError` when the app is unknown, not an app name, or not the TopicAcker's. */
  constructor(private readonly options: RmsConsumerOptions) {
    this.app = consumerApp(options.app, options.acker);
    this.groupId = options.groupId ?? this.app;
    if (this.groupId !== this.app) {
      console.warn("rms: the consumer group is not the app's name: each consumer app needs a group of its own, "
        + "or it misses the records Kafka gives the other apps' members", { app: this.app, groupId: this.groupId });
    }
    this.consumer = options.kafka.consumer({ groupId: this.groupId, allowAutoTopicCreation: true, readUncommitted: false });
  }

  /** Checks the app name against the app of the acker's API key (a `WrongAppError`, and nothing consumed, when they
   * differ), then joins the group. {@link stop} leaves it: the partitions move on, or back to a restarted process, at once. */
  async start(): Promise<void> {
    await checkApp(this.app, this.options.acker);
    for (const signal of this.options.stopOnSignals ?? []) {
      const listener = (): void => {
        void this.stop().catch(() => undefined).finally(() => process.kill(process.pid, signal));
      };
      process.once(signal, listener);
      this.signalListeners.push([signal, listener]);
    }
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: this.options.topics, fromBeginning: this.options.fromBeginning ?? true });
    await this.consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        await this.handleOrSetAside(topic, partition, message);
        await this.consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      },
    });
  }

  private readonly signalListeners: Array<[NodeJS.Signals, () => void]> = [];

  /** Records set aside so far (see {@link RmsConsumerOptions.onSetAside}). */
  setAside = 0;
  /** Records skipped so far because their `rms-awaiting` header does not name this app. */
  notAwaited = 0;

  /** Handles the record, or sets it aside: nothing a record holds stops the consumer. */
  private async handleOrSetAside(topic: string, partition: number, message: KafkaMessage): Promise<void> {
    let reason: string;
    try {
      const record = parseRecord(topic, partition, message);
      if (record !== null) {
        await this.handle(record);
        return;
      }
      reason = "not an RMS record (no valid rms-message-id)";
    } catch (error) {
      reason = `handling threw: ${error instanceof Error ? error.message : String(error)}`;
    }
    this.setAside += 1;
    const setAside = { topic, partition, offset: message.offset, reason };
    if (this.options.onSetAside) this.options.onSetAside(setAside);
    else console.warn("rms: record set aside", setAside);
  }

  /** Stop consuming and leave the group; offsets of records not fully handled stay uncommitted. */
  async stop(): Promise<void> {
    for (const [signal, listener] of this.signalListeners.splice(0)) process.removeListener(signal, listener);
    await this.consumer.disconnect();
    await this.options.acker.close();
  }

  /** Handle one record: the handler runs in a span `rms.process` whose parent is the record's
   * trace context; the ack, in a span `rms.ack` under it, carries that context. */
  async handle(record: RmsRecord): Promise<ConsumerEvent> {
    if (!recordAwaits(record, this.app)) return this.skip(record);
    const parent = contextFromHeaders(record.headers, context.active());
    const span = tracer.startSpan("rms.process", {
      kind: SpanKind.CONSUMER,
      attributes: { "messaging.system": "kafka", "messaging.destination.name": record.topic,
                    "rms.message_id": record.messageId, "rms.delivery": record.delivery },
    }, parent);
    const processing = trace.setSpan(parent, span);
    let event: ConsumerEvent;
    try {
      const process = await context.with(processing, () => this.options.inbox.process(record, this.options.handler));
      span.setAttribute("rms.outcome", process.outcome);
      const ack = process.outcome === "failed" ? null : await this.ack(record, processing);
      event = { record, process, ack };
    } finally {
      span.end();
    }
    this.options.onRecord?.(event);
    return event;
  }

  private skip(record: RmsRecord): ConsumerEvent {
    this.notAwaited += 1;
    const event: ConsumerEvent = { record, process: { outcome: "not-awaited" }, ack: null };
    if (this.options.onRecord) this.options.onRecord(event);
    else console.info("rms: acked already, skipped", { app: this.app, messageId: record.messageId,
                                                       topic: record.topic, awaiting: record.awaiting });
    return event;
  }

  private async ack(record: RmsRecord, parent: Context): Promise<AckResult> {
    const span = tracer.startSpan("rms.ack", { kind: SpanKind.CLIENT, attributes: { "rms.message_id": record.messageId } }, parent);
    try {
      return await this.options.acker.ack(record, traceHeaders(trace.setSpan(parent, span)));
    } finally {
      span.end();
    }
  }
}

/** The app a consumer acks as: `app`, or the one its {@link TopicAcker} signs for. */
function consumerApp(app: string | undefined, acker: Acker): string {
  const signsFor = acker instanceof TopicAcker ? acker.consumerApp : undefined;
  const name = app ?? signsFor;
  if (name === undefined) {
    throw new TypeError("RmsConsumer needs app, the name RMS knows this consumer app by: it skips the records "
                        + "whose rms-awaiting header does not name it");
  }
  if (!isAppName(name)) {
    throw new TypeError(`app ${JSON.stringify(name)} is not an RMS app name (a lowercase letter or digit, then up `
                        + "to 62 of a-z, 0-9, '_' and '-')");
  }
  if (signsFor !== undefined && signsFor !== name) {
    throw new TypeError(`app ${JSON.stringify(name)} differs from ${JSON.stringify(signsFor)}, the app the TopicAcker `
                        + "signs ack records for");
  }
  return name;
}
