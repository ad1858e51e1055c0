// Two consumer apps on one topic of the live RMS: points handles the message and acks it;
// billing's consumer fails as it acks (its ack throws: the record is set aside and committed
// past, nothing acked) and is stopped. RMS redelivers the message naming only billing in
// rms-awaiting: points' consumer skips the redelivery, billing's restarted consumer handles it
// (its inbox knows the id) and acks, and the message is done with both acks.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import type pg from "pg";

import { HttpAcker, Inbox, RmsConsumer, RmsProducer, type Acker, type AckResult, type ConsumerEvent } from "../index.js";
import { createApp, kafka, PREFIX, pool, RMS_URL, skipLive, waitFor, type App } from "./live.js";

const NEVER_ASKED = "http://127.0.0.1:9/";

/** Fails at every ack, as a consumer whose process dies after its handler committed. */
class CrashingAcker implements Acker {
  readonly asked: string[] = [];

  async ack(target: string | { messageId: string }): Promise<AckResult> {
    this.asked.push(typeof target === "string" ? target : target.messageId);
    throw new Error("the consumer's process died");
  }

  async close(): Promise<void> {}
}

/** A consumer app with its own inbox and effects tables and its own consumer group. */
class Service {
  readonly events: ConsumerEvent[] = [];
  readonly inbox: Inbox;
  readonly table: string;

  constructor(readonly app: App, private readonly db: pg.Pool, role: string, private readonly topic: string) {
    this.table = `two_${role}`;
    this.inbox = new Inbox(db, { table: `${this.table}_inbox` });
  }

  async prepare(): Promise<void> {
    await this.inbox.ensure();
    await this.db.query(`CREATE TABLE ${this.table}_effects (message_id text)`);
  }

  consumer(acker: Acker, setAside: string[] = []): RmsConsumer {
    return new RmsConsumer({
      app: this.app.name, kafka: kafka(this.app.name), groupId: this.app.name, topics: [this.topic],
      inbox: this.inbox, acker, onRecord: (event) => this.events.push(event),
      onSetAside: (record) => setAside.push(record.reason),
      handler: async (client, record) => {
        await client.query(`INSERT INTO ${this.table}_effects VALUES ($1)`, [record.messageId]);
      },
    });
  }

  outcomes(messageId: string): string[] {
    return this.events.filter((event) => event.record.messageId === messageId).map((event) => event.process.outcome);
  }

  async effects(messageId: string): Promise<number> {
    return (await this.db.query(`SELECT count(*)::int AS n FROM ${this.table}_effects WHERE message_id = $1`,
                                [messageId])).rows[0].n;
  }
}

async function subscribers(messageId: string): Promise<Map<string, { acked_at: string | null; via: string | null }>> {
  const response = await fetch(`${RMS_URL}/v1/admin/messages/${messageId}`,
                               { headers: { authorization: `Bearer ${process.env.RMS_ADMIN_TOKEN}` } });
  assert.equal(response.status, 200);
  const message = (await response.json()) as { subscribers: { app: string; acked_at: string | null; via: string | null }[] };
  return new Map(message.subscribers.map((subscriber) => [subscriber.app, subscriber]));
}

describe("two consumer apps on one topic (live RMS)", { skip: skipLive }, () => {
  const topic = `paid.${PREFIX}`;
  let db: pg.Pool;
  const running: RmsConsumer[] = [];

  before(() => {
    db = pool();
  });

  after(async () => {
    await Promise.all(running.map((consumer) => consumer.stop().catch(() => undefined)));
    await db?.end();
  });

  async function started(consumer: RmsConsumer): Promise<RmsConsumer> {
    running.push(consumer);
    await consumer.start();
    return consumer;
  }

  it("one acks and skips the redelivery; the other fails before its ack and acks after its restart", async () => {
    const shop = await createApp(`${PREFIX}-two-shop`, { produce: [topic], checkPrefixes: [NEVER_ASKED] });
    const points = new Service(await createApp(`${PREFIX}-two-points`, { consume: [topic] }), db, "points", topic);
    const billing = new Service(await createApp(`${PREFIX}-two-billing`, { consume: [topic] }), db, "billing", topic);
    await points.prepare();
    await billing.prepare();
    const producer = new RmsProducer({ baseUrl: RMS_URL, apiKey: shop.api_key, checkUrl: `${NEVER_ASKED}check` });
    const { message_id: id } = await producer.send({ topic, payload: { order: 7 }, ackTimeoutSeconds: 2 });

    const crashing = new CrashingAcker();
    const setAside: string[] = [];
    const dying = await started(billing.consumer(crashing, setAside));
    await waitFor("billing to handle the record", async () => setAside.length > 0, 60_000);
    await dying.stop();
    // until it stopped, each ack failed (a redelivery may have come in before the stop)
    assert.ok(crashing.asked.length > 0 && crashing.asked.every((asked) => asked === id), String(crashing.asked));
    assert.equal(await billing.effects(id), 1);

    const reader = await started(points.consumer(new HttpAcker({ baseUrl: RMS_URL, apiKey: points.app.api_key })));
    await waitFor("points to handle and ack the message, then skip its redelivery", async () =>
      points.outcomes(id).includes("not-awaited"), 60_000);
    await reader.stop();
    assert.equal(points.outcomes(id)[0], "processed");
    assert.equal(points.events.find((event) => event.record.messageId === id)?.ack?.result, "acked");
    assert.equal(reader.notAwaited, points.outcomes(id).filter((outcome) => outcome === "not-awaited").length);
    assert.equal(await points.effects(id), 1, "the skipped redelivery touched nothing");
    const waiting = await producer.get(id);
    assert.equal(waiting.state, "sent");
    assert.ok(waiting.delivery_count >= 2, JSON.stringify(waiting));

    await started(billing.consumer(new HttpAcker({ baseUrl: RMS_URL, apiKey: billing.app.api_key })));
    await waitFor("billing's restarted consumer to ack", async () => (await producer.get(id)).state === "done", 60_000);
    const restarted = billing.outcomes(id); // the record whose ack threw was set aside, not reported
    assert.ok(restarted.length > 0 && restarted.every((outcome) => outcome === "duplicate"),
              `its inbox had the id: ${restarted}`);
    assert.equal(await billing.effects(id), 1);
    const found = await subscribers(id);
    assert.deepEqual([...found.keys()].sort(), [billing.app.name, points.app.name].sort());
    for (const subscriber of found.values()) assert.ok(subscriber.acked_at && subscriber.via === "http", JSON.stringify([...found]));
  });
});
