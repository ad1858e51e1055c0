// The retry rules against a local HTTP server that misbehaves on purpose (RMS itself never
// closes a connection mid-request on demand, and its overload answers are hard to provoke).
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { RmsProducer, RmsUnavailableError } from "../index.js";

type Step = (request: IncomingMessage, response: ServerResponse, body: string) => void;
const seen: Array<{ path: string; body: string; at: number }> = [];
let script: Step[] = [];
const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks).toString();
    seen.push({ path: request.url ?? "", body, at: Date.now() });
    (script.shift() ?? answer(500, { detail: "script ran out" }))(request, response, body);
  });
});
const answer = (status: number, json: object, headers: Record<string, string> = {}): Step => (_q, response) => {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(json));
};
const echo: Step = (_q, response, body) => {
  response.writeHead(201, { "content-type": "application/json" });
  response.end(JSON.stringify({ ...JSON.parse(body), state: "pending-send" }));
};
const hangUp: Step = (request) => request.socket.destroy();
const cutOff: Step = (_q, response) => {
  response.writeHead(201, { "content-type": "application/json", "content-length": "100" });
  response.write('{"message_id": ');
  setTimeout(() => response.socket?.destroy(), 20);
};

let producer: RmsProducer;
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  producer = new RmsProducer({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k", checkUrl: "http://x/check",
                               retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 1500 } });
});
after(() => server.close());

describe("retries", () => {
  it("retry 503 and 429 after their Retry-After with the same message id", async () => {
    seen.length = 0;
    script = [answer(503, { detail: "busy" }, { "retry-after": "1" }), answer(429, { detail: "slow down" }, { "retry-after": "0" }), echo];
    const message = await producer.prepare({ topic: "t", payload: { n: 1 } });
    assert.equal(seen.length, 3);
    assert.equal(new Set(seen.map((s) => s.body)).size, 1, "every attempt sends the same body");
    assert.equal(JSON.parse(seen[0]!.body).message_id, message.message_id);
    assert.ok(seen[1]!.at - seen[0]!.at >= 950, `waited ${seen[1]!.at - seen[0]!.at} ms for Retry-After: 1`);
  });

  it("retry a 408 (its body came too late, nothing ran) on a new connection", async () => {
    seen.length = 0;
    script = [answer(408, { detail: "body too slow" }, { connection: "close" }), echo];
    const message = await producer.prepare({ topic: "t", payload: 1, messageId: "m-408" });
    assert.equal(message.message_id, "m-408");
    assert.deepEqual(seen.map((s) => JSON.parse(s.body).message_id), ["m-408", "m-408"]);
  });

  it("retry once at once on a connection closed before any byte of the answer", async () => {
    seen.length = 0;
    script = [hangUp, echo];
    const message = await producer.prepare({ topic: "t", payload: 1, messageId: "m-closed" });
    assert.equal(message.message_id, "m-closed");
    assert.deepEqual(seen.map((s) => JSON.parse(s.body).message_id), ["m-closed", "m-closed"]);
  });

  it("retry an answer cut off after its head, with backoff", async () => {
    seen.length = 0;
    script = [cutOff, echo];
    const message = await producer.prepare({ topic: "t", payload: 1, messageId: "m-cut" });
    assert.equal(message.message_id, "m-cut");
    assert.equal(seen.length, 2);
  });

  it("give up with RmsUnavailableError when overload outlasts the attempts", async () => {
    script = [answer(503, { detail: "busy" }), answer(503, { detail: "busy" }), answer(503, { detail: "still busy" })];
    await assert.rejects(producer.confirm("m-1"), (error: unknown) =>
      error instanceof RmsUnavailableError && error.status === 503 && error.detail === "still busy");
  });

  it("give up with RmsUnavailableError when the connection keeps closing", async () => {
    script = [hangUp, hangUp, hangUp, hangUp];
    await assert.rejects(producer.confirm("m-1"), (error: unknown) => error instanceof RmsUnavailableError && error.status === null);
    assert.equal(script.length, 0, "the closed connection was retried once beyond the 3 attempts");
  });

  it("do not retry a refusal", async () => {
    seen.length = 0;
    script = [answer(409, { detail: "message is deleted", current_state: "deleted" })];
    await assert.rejects(producer.confirm("m-1"), { name: "RmsConflictError", currentState: "deleted" });
    assert.equal(seen.length, 1);
  });
});
