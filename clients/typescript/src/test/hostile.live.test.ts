// Hostile records on a consumed topic (ids RMS never writes, a delivery of 5000 digits, null
// and binary headers, values that are no JSON or hold huge numbers, no value at all) are set
// aside and committed past; the RMS record behind them is handled and acknowledged.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import type pg from "pg";

import { HttpAcker, Inbox, RmsConsumer, RmsProducer, type ConsumerEvent, type SetAside } from "../index.js";
import { createApp, kafka, PREFIX, pool, skipLive, waitFor } from "./live.js";

const NEVER_ASKED = "http://127.0.0.1:9/";

describe("hostile records (live RMS)", { skip: skipLive }, () => {
  const topic = `points-hostile.${PREFIX}`;
  let db: pg.Pool;
  let consumer: RmsConsumer | null = null;

  before(() => {
    db = pool();
  });

  after(async () => {
    await consumer?.stop().catch(() => undefined);
    await db?.end();
  });

  it("never stop the consumer", async () => {
    const producerApp = await createApp(`${PREFIX}-hostile-shop`, { produce: [topic], checkPrefixes: [NEVER_ASKED] });
    const consumerApp = await createApp(`${PREFIX}-hostile-points`, { consume: [topic] });
    const hostile = [
      { value: Buffer.from("{"), headers: { "rms-message-id": Buffer.from("a/b\n") } },
      { value: Buffer.from("{}"), headers: { "rms-message-id": Buffer.from("m".repeat(5000)) } },
      { key: Buffer.from("k"), value: null, headers: { "rms-message-id": Buffer.from([0xff, 0xfe]) } },
      { value: Buffer.from("\u0000not json"), headers: { "rms-delivery": Buffer.from("9".repeat(5000)) } },
      { value: Buffer.from('{"n": 1' + "0".repeat(400) + "}") },
    ];
    const writer = kafka(`${PREFIX}-hostile-writer`).producer({ allowAutoTopicCreation: true });
    await writer.connect();
    try {
      await writer.send({ topic, messages: hostile });
    } finally {
      await writer.disconnect();
    }
    const producer = new RmsProducer({ baseUrl: process.env.RMS_URL!, apiKey: producerApp.api_key, checkUrl: `${NEVER_ASKED}check` });
    const sent = await producer.send({ topic, payload: { points: 3 } });
    const inbox = new Inbox(db, { table: "hostile_inbox" });
    await inbox.ensure();
    const events: ConsumerEvent[] = [];
    const setAside: SetAside[] = [];
    consumer = new RmsConsumer({
      app: consumerApp.name, kafka: kafka(`${PREFIX}-hostile`), groupId: `${PREFIX}-hostile`, topics: [topic], inbox,
      handler: async () => undefined, acker: new HttpAcker({ baseUrl: process.env.RMS_URL!, apiKey: consumerApp.api_key }),
      onRecord: (event) => events.push(event), onSetAside: (record) => setAside.push(record),
    });
    await consumer.start();
    await waitFor("the RMS record behind the hostile ones to be acked", async () =>
      events.some((event) => event.record.messageId === sent.message_id && event.ack?.result === "acked"), 45_000);
    assert.deepEqual(events.map((event) => event.record.messageId), [sent.message_id]);
    assert.equal(setAside.length, hostile.length);
    assert.equal(consumer.setAside, hostile.length);
    await waitFor("the message to be done", async () => (await producer.get(sent.message_id)).state === "done");
  });
});
