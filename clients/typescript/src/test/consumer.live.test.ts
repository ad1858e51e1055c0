// A consumer of the live RMS: it receives a record, its first ack is lost, RMS redelivers
// the message (rms-delivery 2), the inbox de-duplicates the redelivery (the handler's effect
// happens once) and the second ack finishes the message: once over HTTP, once as a signed
// record on the ack topic.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { context, ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import type pg from "pg";

import {
  HttpAcker, Inbox, RmsConsumer, RmsProducer, TopicAcker, type Acker, type AckResult, type ConsumerEvent,
  type Handler,
} from "../index.js";
import { ACK_TOPIC, createApp, kafka, PREFIX, pool, skipLive, waitFor, type App } from "./live.js";

/** One-shot sends are never checked back, but every message names a check-back URL. */
const NEVER_ASKED = "http://127.0.0.1:9/";

/** The producer's span: RMS stores its context and puts it on every record of the message. */
const SPAN = { traceId: "5bf92f3577b34da6a3ce929d0e0e4736", spanId: "10f067aa0ba902b7", traceFlags: TraceFlags.SAMPLED };

/** Drops the first ack of each message, as if it were lost on the way. */
class LosingFirstAck implements Acker {
  private readonly dropped = new Set<string>();
  /** The trace headers each ack carried. */
  readonly carried = new Map<string, Record<string, string> | undefined>();
  constructor(private readonly inner: Acker) {}

  async ack(messageId: string, trace?: Record<string, string>): Promise<AckResult> {
    this.carried.set(messageId, trace);
    if (!this.dropped.has(messageId)) {
      this.dropped.add(messageId);
      return { messageId, result: "failed", detail: "lost on purpose" };
    }
    return this.inner.ack(messageId, trace);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

describe("consumer (live RMS)", { skip: skipLive }, () => {
  const httpTopic = `points-http.${PREFIX}`;
  const kafkaTopic = `points-kafka.${PREFIX}`;
  let producerApp: App;
  let consumerApp: App;
  let producer: RmsProducer;
  let db: pg.Pool;
  let inbox: Inbox;
  const consumers: RmsConsumer[] = [];

  const addPoints: Handler = async (client, record) => {
    await client.query("INSERT INTO points (message_id, delivery) VALUES ($1, $2)", [record.messageId, record.delivery]);
  };

  before(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    db = pool();
    inbox = new Inbox(db, { table: "points_inbox" });
    await inbox.ensure();
    await db.query("CREATE TABLE IF NOT EXISTS points (message_id text, delivery int)");
    producerApp = await createApp(`${PREFIX}-shop`, { produce: [httpTopic, kafkaTopic], checkPrefixes: [NEVER_ASKED] });
    consumerApp = await createApp(`${PREFIX}-points`, { consume: [`points-*.${PREFIX}`] });
    producer = new RmsProducer({ baseUrl: process.env.RMS_URL!, apiKey: producerApp.api_key, checkUrl: `${NEVER_ASKED}check` });
  });

  after(async () => {
    await Promise.all(consumers.map((consumer) => consumer.stop().catch(() => undefined)));
    await db?.end();
  });

  async function deliverTwice(topic: string, inner: Acker): Promise<{ events: ConsumerEvent[]; messageId: string }> {
    const acker = new LosingFirstAck(inner);
    const sent = await context.with(trace.setSpanContext(ROOT_CONTEXT, SPAN), () =>
      producer.send({ topic, payload: { points: 5 }, ackTimeoutSeconds: 3 }));
    const events: ConsumerEvent[] = [];
    const consumer = new RmsConsumer({
      kafka: kafka(`${PREFIX}-${topic}`), groupId: `${PREFIX}-${topic}`, topics: [topic], inbox, handler: addPoints,
      acker, onRecord: (event) => events.push(event),
    });
    consumers.push(consumer);
    await consumer.start();
    await waitFor("the redelivery to be acked", async () =>
      events.some((event) => event.record.delivery >= 2 && event.ack?.result === "acked"), 45_000);
    assert.equal(acker.carried.get(sent.message_id)?.traceparent, `00-${SPAN.traceId}-${SPAN.spanId}-01`,
      "the ack carries the record's trace context (no OpenTelemetry SDK: as it came)");
    return { events, messageId: sent.message_id };
  }

  function assertOnce(events: ConsumerEvent[], messageId: string, ack: string): void {
    const mine = events.filter((event) => event.record.messageId === messageId);
    assert.deepEqual(mine.slice(0, 2).map((event) => [event.record.delivery, event.process.outcome, event.ack?.result]),
      [[1, "processed", "failed"], [2, "duplicate", "acked"]], `${ack}: first delivery processed, redelivery de-duplicated`);
    assert.equal(mine[0]!.record.app, producerApp.name);
    assert.deepEqual(mine[0]!.record.payload, { points: 5 });
    assert.equal(mine[0]!.record.headers.traceparent, `00-${SPAN.traceId}-${SPAN.spanId}-01`,
      "the record carries the producer's trace context");
  }

  async function effects(messageId: string): Promise<number> {
    return (await db.query("SELECT count(*)::int AS n FROM points WHERE message_id = $1", [messageId])).rows[0].n;
  }

  it("de-duplicates a redelivery through the inbox and acknowledges over HTTP", async () => {
    const acker = new HttpAcker({ baseUrl: process.env.RMS_URL!, apiKey: consumerApp.api_key });
    const { events, messageId } = await deliverTwice(httpTopic, acker);
    assertOnce(events, messageId, "http");
    assert.equal((await producer.get(messageId)).state, "done");
    assert.equal(await effects(messageId), 1);
  });

  it("de-duplicates a redelivery through the inbox and acknowledges with a signed record on the ack topic", async () => {
    const acker = new TopicAcker({ kafka: kafka(`${PREFIX}-acks`), consumerApp: consumerApp.name,
                                   signingSecret: consumerApp.signing_secret, ackTopic: ACK_TOPIC });
    const { events, messageId } = await deliverTwice(kafkaTopic, acker);
    assertOnce(events, messageId, "ack topic");
    const done = await waitFor("RMS to apply the ack record", async () => {
      const message = await producer.get(messageId);
      return message.state === "done" ? message : null;
    });
    assert.ok(done.done_at);
    assert.equal(await effects(messageId), 1);
  });
});
