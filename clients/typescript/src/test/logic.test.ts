import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";

import {
  ackValue, contextFromHeaders, errorFor, newMessageId, parseRecord, parseRetryAfter, recordHeaders,
  RetryPolicy, RmsConflictError, RmsNotFoundError, RmsUnavailableError, RmsValidationError, traceHeaders,
} from "../index.js";

describe("Retry-After", () => {
  it("reads delta-seconds and HTTP dates, and nothing else", () => {
    assert.equal(parseRetryAfter("3"), 3000);
    assert.equal(parseRetryAfter(" 0 "), 0);
    const now = Date.parse("Thu, 26 Nov 2026 09:00:00 GMT");
    assert.equal(parseRetryAfter("Thu, 26 Nov 2026 09:00:07 GMT", now), 7000);
    assert.equal(parseRetryAfter("Thu, 26 Nov 2026 08:59:00 GMT", now), 0);
    for (const bad of [null, undefined, "", "-1", "1.5", "soon", "12abc"]) assert.equal(parseRetryAfter(bad, now), null, String(bad));
  });

  it("is honoured, capped, and doubling with jitter applies without it", () => {
    const policy = new RetryPolicy({ backoffMs: 100, maxBackoffMs: 2000 });
    assert.equal(policy.delayMs(1, "1"), 1000);
    assert.equal(policy.delayMs(1, "120"), 2000);
    assert.equal(policy.delayMs(3, null, () => 1), 400);
    assert.equal(policy.delayMs(3, null, () => 0), 200);
    assert.equal(policy.delayMs(10, "soon", () => 1), 2000);
  });
});

describe("errors", () => {
  it("map statuses to typed errors carrying the problem document", () => {
    const conflict = errorFor(409, "message is sent", {
      type: "https://rms.dev/problems/part-of-transaction", current_state: "pending-send", transaction_id: "t-1" });
    assert.ok(conflict instanceof RmsConflictError);
    assert.deepEqual([conflict.currentState, conflict.transactionId, conflict.partOfTransaction], ["pending-send", "t-1", true]);
    const invalid = errorFor(422, "message_id: bad", { errors: [{ loc: ["body", "message_id"], msg: "bad" }] });
    assert.ok(invalid instanceof RmsValidationError);
    assert.deepEqual(invalid.errors[0]?.loc, ["body", "message_id"]);
    assert.ok(errorFor(404, "x", {}) instanceof RmsNotFoundError);
    assert.ok(errorFor(503, "x", {}) instanceof RmsUnavailableError);
    assert.equal(errorFor(404, "gone", {}).message, "404: gone");
  });
});

describe("records", () => {
  it("read the rms-* headers, the payload and the trace context", () => {
    const record = parseRecord("orders.paid", 2, {
      offset: "41", key: Buffer.from("k"), value: Buffer.from('{"order": 42}'),
      headers: {
        "rms-message-id": Buffer.from("m-1"), "rms-app": Buffer.from("orders"), "rms-delivery": Buffer.from("2"),
        "rms-created-at": Buffer.from("2026-11-26T09:00:00Z"), empty: undefined, twice: [Buffer.from("a"), Buffer.from("b")],
      },
    });
    assert.ok(record);
    assert.deepEqual([record.messageId, record.delivery, record.app, record.createdAt, record.payload],
      ["m-1", 2, "orders", "2026-11-26T09:00:00Z", { order: 42 }]);
    assert.deepEqual([record.topic, record.partition, record.offset, record.key?.toString()], ["orders.paid", 2, "41", "k"]);
    assert.equal(record.headers.empty, "");
    assert.equal(record.headers.twice, "b");
  });

  it("are not RMS records without rms-message-id; a non-JSON value stays bytes", () => {
    assert.equal(parseRecord("t", 0, { offset: "0", key: null, value: Buffer.from("{}"), headers: {} }), null);
    const raw = parseRecord("t", 0, { offset: "0", key: null, value: Buffer.from("not json"), headers: { "rms-message-id": "x" } });
    assert.ok(Buffer.isBuffer(raw?.payload));
    assert.equal(raw?.delivery, 0);
    assert.deepEqual(recordHeaders({ headers: undefined }), {});
  });

  it("ack values are the contract's JSON, created_at copied as it came", () => {
    assert.equal(ackValue("m-1", "points", "2026-11-26T08:00:00.123456Z"),
      '{"message_id":"m-1","consumer":"points","created_at":"2026-11-26T08:00:00.123456Z"}');
    assert.throws(() => ackValue("m-1", "points", null), /rms-created-at/);
    assert.throws(() => ackValue("m-1", "points", ""), /rms-created-at/);
  });

  it("hostile records are set aside (null), never thrown; odd other headers still read", () => {
    const message = (headers: Record<string, unknown>, value: Buffer | null = Buffer.from("{")) =>
      ({ offset: "0", key: null, value, headers } as Parameters<typeof parseRecord>[2]);
    for (const id of ["", "a/b\n", "m".repeat(5000), "..", "batch", "m\u0000", "m 1"]) {
      assert.equal(parseRecord("t", 0, message({ "rms-message-id": Buffer.from(id) })), null, id);
    }
    assert.equal(parseRecord("t", 0, message({ "rms-message-id": Buffer.from([0xff, 0xfe]) })), null);
    assert.equal(parseRecord("t", 0, message({ "rms-message-id": null }, null)), null);
    assert.equal(parseRecord("t", 0, message({ "rms-message-id": { toString: () => { throw new Error("x"); } } })), null);
    for (const delivery of ["9".repeat(5000), "\u0662", "-1", "1e9", "+5", "1234567890"]) {
      const record = parseRecord("t", 0, message({ "rms-message-id": Buffer.from("m-1"), "rms-delivery": Buffer.from(delivery),
                                                   traceparent: Buffer.from("00-" + "f".repeat(300)) },
                                                 Buffer.from('{"n": 1' + "0".repeat(400) + "}")));
      assert.equal(record?.delivery, 0, delivery);
    }
    assert.ok(parseRecord("t", 0, message({ "rms-message-id": Buffer.from("m-1") }, Buffer.from("[".repeat(5000)))));
  });
});

describe("trace context", () => {
  const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

  it("round-trips a valid traceparent and tracestate", () => {
    const ctx = contextFromHeaders({ traceparent: parent, tracestate: "rojo=00f067aa0ba902b7" }, ROOT_CONTEXT);
    assert.deepEqual(traceHeaders(ctx), { traceparent: parent, tracestate: "rojo=00f067aa0ba902b7" });
  });

  it("ignores invalid ones and is empty outside a span", () => {
    for (const bad of ["", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "00-00000000000000000000000000000000-b7ad6b7169203331-01"]) {
      assert.deepEqual(traceHeaders(contextFromHeaders({ traceparent: bad }, ROOT_CONTEXT)), {}, bad);
    }
    assert.deepEqual(traceHeaders(ROOT_CONTEXT), {});
    const unsampled = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: TraceFlags.NONE });
    assert.equal(traceHeaders(unsampled).traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  });
});

describe("ids", () => {
  it("are 26 characters, time-ordered and valid message ids", () => {
    const early = newMessageId(1_700_000_000_000);
    const late = newMessageId(1_700_000_000_001);
    assert.match(early, /^[0-9a-f]{26}$/);
    assert.ok(early.slice(0, 13) < late.slice(0, 13));
  });
});
