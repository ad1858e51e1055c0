// A consumer checks at start that its app name is the app of its API key (GET /v1/apps/me):
// a misspelled name is refused with a line that says so, before anything is consumed; the
// Kafka consumer group defaults to the app's name, and another one is warned about.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import type pg from "pg";

import { HttpAcker, Inbox, RmsConsumer, WrongAppError } from "../index.js";
import { createApp, kafka, PREFIX, pool, skipLive, type App } from "./live.js";

describe("the consumer's app check (live RMS)", { skip: skipLive }, () => {
  let db: pg.Pool;
  let app: App;
  let inbox: Inbox;
  const topic = `orders-checked.${PREFIX}`;

  before(async () => {
    db = pool();
    inbox = new Inbox(db, { table: "checked_inbox" });
    app = await createApp(`${PREFIX}-checked-${Date.now() % 1_000_000}`, { consume: [topic] });
    const admin = kafka(`${PREFIX}-checked-admin`).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic }], waitForLeaders: true });
    await admin.disconnect();
  });

  after(async () => {
    await db?.end();
  });

  function consumer(name: string, groupId?: string): RmsConsumer {
    return new RmsConsumer({ app: name, kafka: kafka(`${PREFIX}-checked`), groupId, topics: [topic], inbox,
                             handler: async () => undefined,
                             acker: new HttpAcker({ baseUrl: process.env.RMS_URL!, apiKey: app.api_key }) });
  }

  async function logged<T>(level: "error" | "warn", run: () => Promise<T> | T): Promise<[T | Error, string]> {
    const lines: string[] = [];
    const original = console[level];
    console[level] = (...parts: unknown[]) => { lines.push(parts.map((p) => typeof p === "string" ? p : JSON.stringify(p)).join(" ")); };
    try {
      return [await run(), lines.join("\n")];
    } catch (error) {
      return [error as Error, lines.join("\n")];
    } finally {
      console[level] = original;
    }
  }

  it("refuses to start under a name that is not its key's app, saying so", async () => {
    const misspelled = consumer(`${app.name}x`);
    const [error, lines] = await logged("error", () => misspelled.start());
    assert.ok(error instanceof WrongAppError, `expected a WrongAppError, got ${String(error)}`);
    assert.match(error.message, new RegExp(`its API key is app "${app.name}"'s`));
    assert.match(lines, /refusing to run/);
  });

  it("starts under its key's app, in the app's group unless told another one (warned)", async () => {
    const right = consumer(app.name);
    assert.equal(right.groupId, app.name);
    await right.start();
    await right.stop();
    const [shared, lines] = await logged("warn", () => consumer(app.name, `${PREFIX}-shared`));
    assert.ok(shared instanceof RmsConsumer);
    assert.equal(shared.groupId, `${PREFIX}-shared`);
    assert.match(lines, /group of its own/);
  });
});
