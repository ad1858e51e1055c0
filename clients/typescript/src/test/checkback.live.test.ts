// The check-back handler on Node's http module, called by RMS's real confirm worker: a
// producer that crashed after its local commit is confirmed through the barrier, one that
// crashed before it is rolled back (and its late local transaction refused); forged, stale
// and replayed calls are refused over real HTTP.
import assert from "node:assert/strict";
import type { Server } from "node:http";
import { after, before, describe, it } from "node:test";

import type pg from "pg";

import {
  Barrier, BarrierClosedError, createCheckBackHandler, nodeCheckBackListener, RmsProducer, signedHeaders,
  type CheckRequest,
} from "../index.js";
import { createApp, PREFIX, pool, serve, skipLive, waitFor, type App } from "./live.js";

describe("check-back handler (live RMS)", { skip: skipLive }, () => {
  const topic = `payments.${PREFIX}`;
  let app: App;
  let db: pg.Pool;
  let barrier: Barrier;
  let producer: RmsProducer;
  let server: Server;
  let checkUrl: string;
  const asked: CheckRequest[] = [];

  before(async () => {
    db = pool();
    barrier = new Barrier(db, { table: "checkback_barrier", lockTimeoutMs: 2000 });
    await barrier.createTable();
    await db.query("CREATE TABLE IF NOT EXISTS payments (id text PRIMARY KEY)");
    let handler: ReturnType<typeof createCheckBackHandler> | undefined;
    const started = await serve(nodeCheckBackListener((headers, body) => handler!(headers, body)));
    server = started.server;
    checkUrl = `${started.url}/rms/check`;
    app = await createApp(`${PREFIX}-payments`, { produce: [topic], checkPrefixes: [`${started.url}/`] });
    handler = createCheckBackHandler({
      secrets: [app.signing_secret],
      resolve: (check) => { asked.push(check); return barrier.resolve(check); },
    });
    producer = new RmsProducer({ baseUrl: process.env.RMS_URL!, apiKey: app.api_key, checkUrl });
  });

  after(async () => {
    server?.close();
    await db?.end();
  });

  it("resolves a producer that crashed after its local commit (committed) or before it (rolled_back)", async () => {
    const committed = await producer.prepare({ topic, payload: { paid: 10 }, messageId: `${PREFIX}-pay-1`, checkAfterSeconds: 1 });
    await barrier.run(committed.message_id, async (client) => {
      await client.query("INSERT INTO payments (id) VALUES ($1)", [committed.message_id]);
    }); // the producer dies here, before its confirm
    const abandoned = await producer.prepare({ topic, payload: { paid: 20 }, messageId: `${PREFIX}-pay-2`, checkAfterSeconds: 1 });
    // ... and this one dies before its local transaction even began

    const states = await waitFor("both messages to be resolved by check-back", async () => {
      const now = [(await producer.get(committed.message_id)).state, (await producer.get(abandoned.message_id)).state];
      return now.includes("pending-send") ? null : now;
    });
    assert.deepEqual(states, ["sent", "deleted"]);
    const first = asked.find((check) => check.message_id === committed.message_id);
    assert.ok(first, "RMS asked the handler");
    assert.deepEqual([first.app, first.topic, first.check_count], [app.name, topic, 1]);

    // the late local transaction of the rolled-back message can no longer commit
    await assert.rejects(barrier.run(abandoned.message_id, async () => undefined), BarrierClosedError);
    assert.equal(await barrier.check(abandoned.message_id), "rolled_back");
  });

  it("refuses forged (401), stale (401) and replayed (409) calls over HTTP", async () => {
    const body = JSON.stringify({ message_id: `${PREFIX}-pay-1`, app: app.name, topic, key: null, headers: {},
                                  created_at: new Date().toISOString(), check_count: 99 });
    const post = (headers: Record<string, string>) =>
      fetch(checkUrl, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body });
    const stamp = Math.floor(Date.now() / 1000);
    const forger = "whsec_" + Buffer.from("not the app's secret at all").toString("base64");

    const forged = await post(signedHeaders([forger], body, `msg_${PREFIX}_forged`, stamp));
    assert.equal(forged.status, 401);
    assert.equal(forged.headers.get("content-type"), "application/problem+json");
    assert.match((await forged.json() as { detail: string }).detail, /no webhook-signature matches/);

    const stale = await post(signedHeaders([app.signing_secret], body, `msg_${PREFIX}_stale`, stamp - 3600));
    assert.equal(stale.status, 401);
    assert.match((await stale.json() as { detail: string }).detail, /outside the 300s tolerance/);

    const genuine = signedHeaders([app.signing_secret], body, `msg_${PREFIX}_once`, stamp);
    const first = await post(genuine);
    assert.deepEqual([first.status, await first.json()], [200, { status: "committed" }]);
    const replay = await post(genuine);
    assert.equal(replay.status, 409);
    assert.equal((await replay.json() as { title: string }).title, "Replayed request");

    const get = await fetch(checkUrl);
    assert.equal(get.status, 405);
  });
});
