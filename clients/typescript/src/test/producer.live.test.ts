// The producer against the live RMS: prepare → local commit → confirm, a transaction of three
// messages (confirmed, and resolved by an Express check-back after a crash), batches, delayed
// delivery, the trace context, and the typed errors of 404, 409 and 422.
import assert from "node:assert/strict";
import type { Server } from "node:http";
import { after, before, describe, it } from "node:test";

import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { context, ROOT_CONTEXT, trace, TraceFlags } from "@opentelemetry/api";
import express from "express";
import type pg from "pg";

import {
  Barrier, createCheckBackHandler, expressCheckBack, RmsConflictError, RmsNotFoundError, RmsProducer,
  RmsValidationError, type MemberDraft,
} from "../index.js";
import { createApp, PREFIX, pool, serve, skipLive, waitFor, type App } from "./live.js";

describe("producer (live RMS)", { skip: skipLive }, () => {
  const orders = `orders.${PREFIX}`;
  const billing = `billing.${PREFIX}`;
  let app: App;
  let db: pg.Pool;
  let barrier: Barrier;
  let producer: RmsProducer;
  let server: Server;
  const calls: string[] = [];

  before(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    db = pool();
    barrier = new Barrier(db, { table: "producer_barrier" });
    await barrier.createTable();
    await db.query("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, paid boolean NOT NULL)");
    const web = express();
    const started = await serve(web);
    server = started.server;
    app = await createApp(`${PREFIX}-producer`, { produce: [orders, billing], checkPrefixes: [`${started.url}/`] });
    const handler = createCheckBackHandler({
      secrets: [app.signing_secret],
      resolve: barrier.resolve,
      resolveTransaction: (check) => { calls.push(check.transaction_id); return barrier.resolveTransaction(check); },
    });
    web.post("/rms/check", expressCheckBack(handler));
    producer = new RmsProducer({ baseUrl: process.env.RMS_URL!, apiKey: app.api_key, checkUrl: `${started.url}/rms/check` });
  });

  after(async () => {
    server?.close();
    await db?.end();
  });

  it("prepare → local commit → confirm, carrying the active trace context", async () => {
    const span = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: TraceFlags.SAMPLED };
    const id = `${PREFIX}-order-1`;
    const seen = await context.with(trace.setSpanContext(ROOT_CONTEXT, span), () =>
      producer.transactional({ topic: orders, payload: { order: 1 }, messageId: id }, async (message) => {
        assert.equal(message.state, "pending-send");
        await barrier.run(message.message_id, async (client) => {
          await client.query("INSERT INTO orders (id, paid) VALUES ($1, true)", [id]);
        });
        return message;
      }));
    assert.equal(seen.traceparent, `00-${span.traceId}-${span.spanId}-01`);
    const confirmed = await producer.get(id);
    assert.equal(confirmed.state, "sent");
    assert.equal(confirmed.delivery_count, 1);
  });

  it("cancel when the local transaction fails, and a retried prepare answers the stored message", async () => {
    const id = `${PREFIX}-order-2`;
    await assert.rejects(producer.transactional({ topic: orders, payload: { order: 2 }, messageId: id }, async (message) =>
      barrier.run(message.message_id, async () => { throw new Error("card declined"); })), /card declined/);
    assert.equal((await producer.get(id)).state, "deleted");
    const again = await producer.prepare({ topic: orders, payload: { order: 2 }, messageId: id });
    assert.equal(again.state, "deleted");
  });

  it("a transaction of three messages: prepared, committed locally, confirmed as one", async () => {
    const drafts: MemberDraft[] = [
      { topic: orders, payload: { step: 1 }, key: "o-3" },
      { topic: billing, payload: { step: 2 } },
      { topic: orders, payload: { step: 3 }, key: "o-3" },
    ];
    const transactionId = `${PREFIX}-txn-1`;
    const prepared = await producer.transaction(drafts, { transactionId }, async (tx) => {
      assert.equal(tx.state, "pending");
      assert.deepEqual(tx.messages.map((m) => m.state), ["pending-send", "pending-send", "pending-send"]);
      await barrier.run(tx.transaction_id, async (client) => {
        await client.query("INSERT INTO orders (id, paid) VALUES ($1, true)", [`${PREFIX}-o-3`]);
      });
      return tx;
    });
    const done = await producer.getTransaction(transactionId);
    assert.equal(done.state, "confirmed");
    assert.deepEqual(done.messages.map((m) => m.message_id), prepared.messages.map((m) => m.message_id));
    assert.deepEqual(done.messages.map((m) => [m.topic, m.state, (m.payload as { step: number }).step]),
      [[orders, "sent", 1], [billing, "sent", 2], [orders, "sent", 3]]);
  });

  it("a transaction whose producer crashed after its local commit is confirmed by the Express check-back", async () => {
    const transactionId = `${PREFIX}-txn-2`;
    const tx = await producer.prepareTransaction([
      { topic: orders, payload: { n: 1 } }, { topic: orders, payload: { n: 2 } }, { topic: billing, payload: { n: 3 } },
    ], { transactionId, checkAfterSeconds: 1 });
    await barrier.run(tx.transaction_id, async (client) => {
      await client.query("INSERT INTO orders (id, paid) VALUES ($1, true)", [`${PREFIX}-o-4`]);
    }); // ... and the producer dies before its confirm
    const confirmed = await waitFor("the check-back to confirm the transaction", async () => {
      const now = await producer.getTransaction(transactionId);
      return now.state === "confirmed" ? now : null;
    });
    assert.ok(calls.includes(transactionId));
    assert.ok(confirmed.check_count >= 1);
    assert.deepEqual(confirmed.messages.map((m) => m.state), ["sent", "sent", "sent"]);
  });

  it("batches and delayed delivery", async () => {
    const ids = [`${PREFIX}-b-1`, `${PREFIX}-b-2`];
    const batch = await producer.prepareBatch(ids.map((messageId, n) => ({ topic: orders, payload: { n }, messageId })));
    assert.deepEqual(batch.map((m) => m.state), ["pending-send", "pending-send"]);
    assert.deepEqual((await producer.confirmBatch(ids)).map((m) => m.state), ["sent", "sent"]);
    const later = new Date(Date.now() + 3_600_000);
    const delayed = await producer.send({ topic: orders, payload: { late: true }, deliverAfter: later });
    assert.deepEqual([delayed.state, delayed.delivery_count], ["sent", 0]);
    assert.equal(Date.parse(delayed.deliver_after!), later.getTime());
    const relative = await producer.send({ topic: orders, payload: { late: true }, delaySeconds: 600 });
    assert.equal(relative.delivery_count, 0);
    assert.ok(Date.parse(relative.next_delivery_at!) > Date.now() + 500_000);
  });

  it("typed errors: 404, 409 with the current state or the transaction, 422 with the problem", async () => {
    await assert.rejects(producer.get(`${PREFIX}-nobody`), (error: unknown) =>
      error instanceof RmsNotFoundError && error.status === 404);
    const sent = await producer.send({ topic: orders, payload: { n: 5 } });
    await assert.rejects(producer.cancel(sent.message_id), (error: unknown) =>
      error instanceof RmsConflictError && error.currentState === "sent" && !error.partOfTransaction);
    const tx = await producer.prepareTransaction([{ topic: orders, payload: 1 }, { topic: orders, payload: 2 }]);
    await assert.rejects(producer.confirm(tx.messages[1]!.message_id), (error: unknown) =>
      error instanceof RmsConflictError && error.partOfTransaction && error.transactionId === tx.transaction_id
      && error.currentState === "pending-send");
    await producer.cancelTransaction(tx.transaction_id);
    await assert.rejects(producer.prepare({ topic: orders, payload: 1, messageId: "no spaces allowed" }), (error: unknown) =>
      error instanceof RmsValidationError && error.status === 422
      && error.errors.some((item) => item.loc.includes("message_id")) && /message_id/.test(error.detail));
    await assert.rejects(producer.prepare({ topic: orders, payload: 1, delaySeconds: 1, deliverAfter: new Date() }),
      (error: unknown) => error instanceof RmsValidationError);
  });
});
