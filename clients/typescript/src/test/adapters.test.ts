// The check-back adapters on real local servers: Node's http module and Express (with no body
// parser, after express.raw(), and wrongly after express.json()).
import assert from "node:assert/strict";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";

import express from "express";

import { createCheckBackHandler, expressCheckBack, nodeCheckBackListener, signedHeaders } from "../index.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const asked: string[] = [];
const handler = createCheckBackHandler({ secrets: [SECRET], resolve: (check) => { asked.push(check.message_id); return "committed"; } });
const servers: Server[] = [];
after(() => servers.forEach((server) => server.close()));

async function start(listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/rms/check`;
}

function check(url: string, id: string): Promise<Response> {
  const body = JSON.stringify({ message_id: id, app: "a", topic: "t", key: null, headers: {}, created_at: "x", check_count: 1 });
  const headers = signedHeaders([SECRET], body, `msg_${id}_1`, Math.floor(Date.now() / 1000));
  return fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body });
}

describe("adapters", () => {
  it("Node http: answers, refuses other methods (405) and oversized bodies (413)", async () => {
    const url = await start(nodeCheckBackListener(handler, { maxBodyBytes: 1024 }));
    const answer = await check(url, "node-1");
    assert.deepEqual([answer.status, await answer.json()], [200, { status: "committed" }]);
    assert.equal((await fetch(url)).status, 405);
    const big = await fetch(url, { method: "POST", body: "x".repeat(4096) });
    assert.equal(big.status, 413);
  });

  it("Express: with no body parser and after express.raw()", async () => {
    const app = express();
    app.post("/rms/check", expressCheckBack(handler));
    const raw = express();
    raw.post("/rms/check", express.raw({ type: "*/*" }), expressCheckBack(handler));
    for (const [url, id] of [[await start(app), "express-1"], [await start(raw), "express-2"]] as const) {
      const answer = await check(url, id);
      assert.deepEqual([answer.status, await answer.json()], [200, { status: "committed" }], id);
    }
    assert.ok(asked.includes("express-1") && asked.includes("express-2"));
  });

  it("Express: after express.json() the signature cannot be checked, so it is an error, not an answer", async () => {
    const errors: unknown[] = [];
    const app = express();
    app.use(express.json());
    app.post("/rms/check", expressCheckBack(handler));
    app.use((error: unknown, _request: express.Request, response: express.Response, _next: express.NextFunction) => {
      errors.push(error);
      response.status(500).end();
    });
    const answer = await check(await start(app), "express-3");
    assert.equal(answer.status, 500);
    assert.match(String(errors[0]), /needs the raw body/);
    assert.ok(!asked.includes("express-3"));
  });
});
