// The consumer's rms-awaiting rule (design section 6), without a broker or a database: a record
// whose header names other apps only is skipped (no handler, no inbox, no ack); one without the
// header, or with one that cannot be read, is handled; reading never throws.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import kafkajs from "kafkajs";

import {
  type Acker, type AckResult, awaitingOf, type Inbox, isAppName, parseRecord, recordAwaits, RmsConsumer, TopicAcker,
} from "../index.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
type Headers = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

function headers(...awaiting: (Buffer | string)[]): Headers {
  const base: Headers = { "rms-message-id": Buffer.from("m-1"), "rms-created-at": Buffer.from("2026-11-28T00:00:00.000001Z") };
  if (awaiting.length === 1) base["rms-awaiting"] = awaiting[0];
  if (awaiting.length > 1) base["rms-awaiting"] = awaiting;
  return base;
}

function record(found: Headers) {
  const parsed = parseRecord("orders.paid", 0, { offset: "1", key: null, value: Buffer.from("{}"), headers: found });
  assert.ok(parsed);
  return parsed;
}

describe("the rms-awaiting header", () => {
  it("gives its app names when it can be read", () => {
    assert.deepEqual(awaitingOf(headers(Buffer.from("points"))), ["points"]);
    assert.deepEqual(awaitingOf(headers(Buffer.from(" billing , points\t"))), ["billing", "points"]);
    assert.deepEqual(awaitingOf(headers("billing")), ["billing"]);
  });

  it("is not known when it cannot be read, and the record is then for every app", () => {
    const unreadable: Headers[] = [
      headers(), headers(Buffer.from("")), headers(Buffer.from("  ")), { ...headers(), "rms-awaiting": undefined },
      headers(Buffer.from("billing,,points")), headers(Buffer.from("billing,")), headers(Buffer.from("Billing")),
      headers(Buffer.from("bill ing")), headers(Buffer.from("billing\n")), headers(Buffer.from([0xff, 0xfe, 0x62])),
      headers(Buffer.from("billing"), Buffer.from("billing")), headers(Buffer.from("billing"), Buffer.from("points")),
    ];
    for (const each of unreadable) {
      assert.equal(awaitingOf(each), null, JSON.stringify(each));
      assert.ok(recordAwaits(record(each), "points"));
    }
    const hostile = { "rms-awaiting": { toString: () => { throw new Error("x"); } } } as unknown as Headers;
    assert.equal(awaitingOf(hostile), null);
  });

  it("skips only when read and without the app", () => {
    const parsed = record(headers(Buffer.from("billing")));
    assert.deepEqual(parsed.awaiting, ["billing"]);
    assert.equal(recordAwaits(parsed, "points"), false);
    assert.equal(recordAwaits(parsed, "billing"), true);
  });

  it("never throws on any bytes, and reads only a clear list", () => {
    const parts = ["points", "billing", " ", ",", "", "é", "\u0000", "a".repeat(70)];
    for (let i = 0; i < 5000; i++) {
      const raw = i % 2 ? randomBytes(i % 40)
        : Buffer.from(Array.from({ length: i % 6 }, (_, n) => parts[(i * 7 + n * 3) % parts.length]).join(""));
      const names = awaitingOf(headers(raw));
      if (names !== null) assert.ok(names.length > 0 && names.every(isAppName), raw.toString("hex"));
    }
  });
});

class RecordingAcker implements Acker {
  acked: string[] = [];

  async ack(target: string | { messageId: string }): Promise<AckResult> {
    const messageId = typeof target === "string" ? target : target.messageId;
    this.acked.push(messageId);
    return { messageId, result: "acked" };
  }

  async close(): Promise<void> {}
}

/** A consumer whose broker is never reached and whose inbox only counts and fails. */
function consumer(acker: Acker, app?: string): { consumer: RmsConsumer; processed: string[] } {
  const processed: string[] = [];
  const inbox = {
    process: async (message: { messageId: string }) => {
      processed.push(message.messageId);
      return { outcome: "failed", error: new Error("no database in a unit test") };
    },
  } as unknown as Inbox;
  const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING });
  return { consumer: new RmsConsumer({ app, kafka, groupId: "points", topics: ["orders.paid"], inbox,
                                       handler: async () => undefined, acker, onRecord: () => undefined }), processed };
}

describe("the consumer", () => {
  it("skips a record awaited from other apps only: no inbox, no ack", async () => {
    const acker = new RecordingAcker();
    const { consumer: points, processed } = consumer(acker, "points");
    const event = await points.handle(record(headers(Buffer.from("billing, shipping"))));
    assert.deepEqual([event.process.outcome, event.ack], ["not-awaited", null]);
    assert.equal(points.notAwaited, 1);
    assert.deepEqual([processed, acker.acked], [[], []]);
  });

  it("hands every record it may not skip to the inbox", async () => {
    const acker = new RecordingAcker();
    const { consumer: points, processed } = consumer(acker, "points");
    const cases = [headers(Buffer.from("points,billing")), headers(Buffer.from("billing"), Buffer.from("billing")),
                   headers(Buffer.from([0xff])), headers()];
    for (const each of cases) assert.equal((await points.handle(record(each))).process.outcome, "failed");
    assert.equal(processed.length, cases.length);
    assert.equal(points.notAwaited, 0);
    assert.deepEqual(acker.acked, []);
  });

  it("needs its app, or the one its TopicAcker signs for", () => {
    const kafka = new kafkajs.Kafka({ brokers: ["127.0.0.1:1"], logLevel: kafkajs.logLevel.NOTHING });
    const signing = new TopicAcker({ kafka, consumerApp: "points", signingSecret: SECRET });
    assert.equal(consumer(signing).consumer.app, "points");
    assert.equal(consumer(signing, "points").consumer.app, "points");
    assert.throws(() => consumer(new RecordingAcker()), /needs app/);
    assert.throws(() => consumer(new RecordingAcker(), "Points"), /not an RMS app name/);
    assert.throws(() => consumer(signing, "billing"), /differs from "points"/);
  });
});
