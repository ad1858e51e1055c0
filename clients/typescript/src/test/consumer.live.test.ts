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
  ackValue, HttpAcker, Inbox, RmsConsumer, RmsProducer, signedHeaders, TopicAcker, type Acker, type AckResult,
  type AckTarget, type ConsumerEvent, type Handler,
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

  async ack(target: AckTarget, trace?: Record<string, string>): Promise<AckResult> {
    const messageId = typeof target === "string" ? target : target.messageId;
    this.carried.set(messageId, trace);
    if (!this.dropped.has(messageId)) {
      this.dropped.add(messageId);
      return { messageId, result: "failed", detail: "lost on purpose" };
    }
    return this.inner.ack(target, trace);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

describe("consumer (live RMS)", { skip: skipLive }, () => {
  const httpTopic = `points-http.${PREFIX}`;
  const kafkaTopic = `points-kafka.${PREFIX}`;
  const staleTopic = `points-stale.${PREFIX}`; // nobody reads it: only the test's acks finish its messages
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
    producerApp = await createApp(`${PREFIX}-shop`, { produce: [httpTopic, kafkaTopic, staleTopic], checkPrefixes: [NEVER_ASKED] });
    // its own topics only: an app whose consume_topics match a topic is a subscriber of its
    // messages, and another test's topic (points-hostile) would then wait for this app's ack
    consumerApp = await createApp(`${PREFIX}-points`, { consume: [httpTopic, kafkaTopic, staleTopic] });
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
      app: consumerApp.name, kafka: kafka(`${PREFIX}-${topic}`), groupId: `${PREFIX}-${topic}`, topics: [topic], inbox, handler: addPoints,
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
    const written: string[] = [];
    const writer = kafka(`${PREFIX}-acks`).producer();
    const send = writer.send.bind(writer);
    writer.send = (record) => {
      written.push(...record.messages.map((message) => String(message.value)));
      return send(record);
    };
    await writer.connect();
    const acker = new TopicAcker({ producer: writer, consumerApp: consumerApp.name,
                                   signingSecret: consumerApp.signing_secret, ackTopic: ACK_TOPIC });
    try {
      const { events, messageId } = await deliverTwice(kafkaTopic, acker);
      assertOnce(events, messageId, "ack topic");
      const done = await waitFor("RMS to apply the ack record", async () => {
        const message = await producer.get(messageId);
        return message.state === "done" ? message : null;
      });
      assert.ok(done.done_at);
      assert.equal(await effects(messageId), 1);
      const createdAt = events.find((event) => event.record.messageId === messageId)!.record.createdAt;
      assert.ok(createdAt, "the record carries rms-created-at");
      const expected = JSON.stringify({ message_id: messageId, consumer: consumerApp.name, created_at: createdAt });
      assert.ok(written.length >= 1);
      assert.deepEqual(written, written.map(() => expected), "each ack record names the record's instance");
    } finally {
      await writer.disconnect();
    }
  });

  it("leaves a message sent when an ack record names another instance of its id (stale)", async () => {
    // A created_at one second off, as a replayed record of an earlier message with the same id
    // would carry. A second message's ack written after it, keyed alike (one partition, read in
    // order), shows RMS has read it; the right created_at then finishes the message.
    const target = await producer.send({ topic: staleTopic, payload: { points: 1 } });
    const sentinel = await producer.send({ topic: staleTopic, payload: { points: 2 } });
    const writer = kafka(`${PREFIX}-stale-acks`).producer();
    await writer.connect();
    const write = async (messageId: string, createdAt: string): Promise<void> => {
      const value = ackValue(messageId, consumerApp.name, createdAt);
      await writer.send({ topic: ACK_TOPIC, acks: -1,
                          messages: [{ key: target.message_id, value, headers: signedHeaders([consumerApp.signing_secret], value) }] });
    };
    try {
      const created = (await producer.get(target.message_id)).created_at;
      const wrong = new Date(Date.parse(created) + 1000).toISOString();
      await write(target.message_id, wrong);
      await write(sentinel.message_id, (await producer.get(sentinel.message_id)).created_at);
      await waitFor("the ack written after the wrong one to apply", async () =>
        (await producer.get(sentinel.message_id)).state === "done");
      assert.equal((await producer.get(target.message_id)).state, "sent",
        `an ack naming created_at ${wrong} (the message's is ${created}) is refused`);
      await write(target.message_id, created);
      await waitFor("the ack naming the message's created_at to apply", async () =>
        (await producer.get(target.message_id)).state === "done");
    } finally {
      await writer.disconnect();
    }
  });
});
