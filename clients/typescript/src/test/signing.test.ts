import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";

import type { Producer, ProducerRecord } from "kafkajs";

import {
  createCheckBackHandler, MemoryReplayGuard, parseCheck, parseRecord, SignatureError, signedHeaders,
  TopicAcker, Verifier, type CheckRequest, type TransactionCheckRequest,
} from "../index.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER = "whsec_" + Buffer.from("another secret of 24 by").toString("base64");
const now = () => Math.floor(Date.now() / 1000);
const CHECK = JSON.stringify({
  message_id: "m-1", app: "orders", topic: "orders.paid", key: null, headers: {},
  created_at: "2026-11-26T09:00:00Z", check_count: 1,
});

describe("signatures", () => {
  it("sign the same bytes as RMS's Python signer (a fixed vector)", () => {
    // rms_client.signing.sign(SECRET, "msg_1", 1700000000, b"{}")
    assert.equal(signedHeaders([SECRET], "{}", "msg_1", 1700000000)["webhook-signature"],
      "v1,x5lVgj0b/JJJaUYaa1+6I5J/EECcryrPlFN4VrkmI94=");
  });

  it("verify a fresh signature by either secret of a rotation", () => {
    const verifier = new Verifier([OTHER, SECRET]);
    const headers = signedHeaders([SECRET], CHECK, "msg_m-1_1", now());
    assert.deepEqual(verifier.verify(headers, CHECK), { webhookId: "msg_m-1_1", timestamp: Number(headers["webhook-timestamp"]) });
    assert.equal(verifier.verify(new Headers(headers), Buffer.from(CHECK)).webhookId, "msg_m-1_1");
  });

  it("refuse a forged signature, a changed body, a stale or future timestamp and missing headers", () => {
    const verifier = new Verifier([SECRET]);
    const forged = signedHeaders([OTHER], CHECK, "msg_m-1_1", now());
    assert.throws(() => verifier.verify(forged, CHECK), /no webhook-signature matches/);
    const good = signedHeaders([SECRET], CHECK, "msg_m-1_1", now());
    assert.throws(() => verifier.verify(good, CHECK.replace("m-1", "m-2")), SignatureError);
    const stale = signedHeaders([SECRET], CHECK, "msg_m-1_1", now() - 301);
    assert.throws(() => verifier.verify(stale, CHECK), /outside the 300s tolerance/);
    const future = signedHeaders([SECRET], CHECK, "msg_m-1_1", now() + 301);
    assert.throws(() => verifier.verify(future, CHECK), /outside the 300s tolerance/);
    assert.throws(() => verifier.verify({ "webhook-id": "x" }, CHECK), /missing header\(s\): webhook-timestamp, webhook-signature/);
    assert.throws(() => verifier.verify({ ...good, "webhook-timestamp": "soon" }, CHECK), /not unix seconds/);
  });

  it("refuse a malformed secret and a tolerance the library cannot honour", () => {
    assert.throws(() => new Verifier(["whsec_%%%"]), /'whsec_' followed by base64/);
    assert.throws(() => new Verifier([]), /at least one signing secret/);
    assert.throws(() => new Verifier([SECRET], 3600), RangeError);
  });
});

describe("check-back handler", () => {
  before(() => { context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()); });
  const seen: Array<CheckRequest | TransactionCheckRequest> = [];
  const handler = createCheckBackHandler({
    secrets: [SECRET],
    resolve: (check) => { seen.push(check); return check.message_id === "boom" ? Promise.reject(new Error("db down")) : "committed"; },
    resolveTransaction: (check) => { seen.push(check); return "rolled_back"; },
  });
  const call = (body: string, id: string, stamp = now(), secret = SECRET) =>
    handler(signedHeaders([secret], body, id, stamp), body);

  it("answers the resolver's status for a message and for a transaction", async () => {
    const answer = await call(CHECK, "msg_m-1_1");
    assert.deepEqual([answer.status, JSON.parse(answer.body)], [200, { status: "committed" }]);
    const txn = JSON.stringify({ transaction_id: "t-1", app: "orders", message_ids: ["a", "b"], created_at: "x", check_count: 2 });
    const txnAnswer = await call(txn, "txn_t-1_2");
    assert.deepEqual(JSON.parse(txnAnswer.body), { status: "rolled_back" });
    assert.deepEqual(seen.map((c) => c.message_id ?? c.transaction_id), ["m-1", "t-1"]);
  });

  it("answers unknown when the resolver throws or no transaction resolver is given", async () => {
    const body = CHECK.replace('"m-1"', '"boom"');
    assert.deepEqual(JSON.parse((await call(body, "msg_boom_1")).body), { status: "unknown" });
    const bare = createCheckBackHandler({ secrets: [SECRET], resolve: () => "committed" });
    const txn = JSON.stringify({ transaction_id: "t-2", app: "o", message_ids: [], created_at: "x", check_count: 1 });
    const answer = await bare(signedHeaders([SECRET], txn, "txn_t-2_1", now()), txn);
    assert.deepEqual(JSON.parse(answer.body), { status: "unknown" });
  });

  it("refuses a forged (401), stale (401) and replayed (409) call with a problem document", async () => {
    const forged = await call(CHECK, "msg_m-1_9", now(), OTHER);
    assert.equal(forged.status, 401);
    assert.equal(forged.headers["content-type"], "application/problem+json");
    assert.match(JSON.parse(forged.body).detail, /no webhook-signature matches/);
    const stale = await call(CHECK, "msg_m-1_8", now() - 600);
    assert.equal(stale.status, 401);
    assert.match(JSON.parse(stale.body).detail, /tolerance/);
    assert.equal((await call(CHECK, "msg_m-1_7")).status, 200);
    const replay = await call(CHECK, "msg_m-1_7");
    assert.deepEqual([replay.status, JSON.parse(replay.body).title], [409, "Replayed request"]);
  });

  it("refuses a signed body that is not a check-back request (422)", async () => {
    const answer = await call('{"message_id": 5}', "msg_x_1");
    assert.equal(answer.status, 422);
    assert.match(JSON.parse(answer.body).detail, /message_id, app, topic, created_at, check_count/);
    assert.equal(parseCheck("[1]"), "body: not a JSON object");
    assert.equal(parseCheck("{"), "body: not JSON");
  });

  it("runs the resolver in the call's trace context", async () => {
    let seenTrace: string | undefined;
    const traced = createCheckBackHandler({ secrets: [SECRET], resolve: () => {
      seenTrace = trace.getSpanContext(context.active())?.traceId;
      return "committed";
    } });
    const headers = { ...signedHeaders([SECRET], CHECK, "msg_m-1_3", now()),
                      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };
    assert.equal((await traced(headers, CHECK)).status, 200);
    assert.equal(seenTrace, "0af7651916cd43dd8448eb211c80319c");
  });

  it("forgets replay ids only after the window", () => {
    const guard = new MemoryReplayGuard();
    assert.equal(guard.firstUse("a", Date.now() + 60_000), true);
    assert.equal(guard.firstUse("a", Date.now() + 60_000), false);
  });
});

describe("ack records", () => {
  it("name the record's message and instance and are signed with the consumer's secret", async () => {
    const sent: ProducerRecord[] = [];
    const producer = { connect: async () => undefined,
                       send: async (record: ProducerRecord) => { sent.push(record); return []; } };
    const acker = new TopicAcker({ producer: producer as unknown as Producer, consumerApp: "points",
                                   signingSecret: SECRET, ackTopic: "rms.acks" });
    const record = parseRecord("orders.paid", 0, { offset: "0", key: null, value: Buffer.from("{}"), headers: {
      "rms-message-id": Buffer.from("m-1"), "rms-created-at": Buffer.from("2026-11-26T08:00:00.123456Z") } });
    assert.deepEqual(await acker.ack(record!), { messageId: "m-1", result: "acked" });
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.topic, "rms.acks");
    const [message] = sent[0]!.messages;
    assert.equal(message!.key, "m-1");
    assert.equal(message!.value,
      '{"message_id":"m-1","consumer":"points","created_at":"2026-11-26T08:00:00.123456Z"}');
    const headers = message!.headers as Record<string, string>;
    assert.match(new Verifier([SECRET]).verify(headers, String(message!.value)).webhookId, /^ack_/);
    assert.throws(() => new Verifier([OTHER]).verify(headers, String(message!.value)), SignatureError);
  });
});
