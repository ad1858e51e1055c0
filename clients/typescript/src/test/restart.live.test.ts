// A consumer process ended by SIGTERM and started again: without `stopOnSignals` it ends
// without leaving its group and the restarted one waits for the session timeout; with it, the
// consumer leaves the group as it stops and the restarted one handles the next message within
// seconds. Prints both gaps.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { before, describe, it } from "node:test";

import { RmsProducer } from "../index.js";
import { createApp, PREFIX, skipLive, waitFor } from "./live.js";

const MEMBER = fileURLToPath(new URL("./restart-member.js", import.meta.url));
const LEAVING_BOUND_MS = 8_000;

class Member {
  readonly started = Date.now();
  readonly handled = new Map<string, number>();
  private readonly child: ChildProcess;

  constructor(app: { name: string; api_key: string }, topic: string, leave: boolean) {
    this.child = spawn(process.execPath, [MEMBER], {
      env: { ...process.env, RMS_RESTART_MEMBER: [app.name, app.api_key, topic, leave ? "leave" : "stay"].join(" ") },
      stdio: ["ignore", "pipe", "inherit"],
    });
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      const [word, id] = line.split(" ");
      if (word === "handled" && id) this.handled.set(id, Date.now());
    });
  }

  async until(messageId: string): Promise<number> {
    return waitFor(`${messageId} to be handled`, async () => this.handled.get(messageId), 90_000);
  }

  async terminate(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGTERM");
    await once(this.child, "exit");
  }
}

describe("a consumer's restart (live RMS)", { skip: skipLive }, () => {
  const topic = `orders-restart.${PREFIX}`;
  let producer: RmsProducer;

  before(async () => {
    const shop = await createApp(`${PREFIX}-restart-shop`, { produce: [topic], checkPrefixes: ["http://127.0.0.1:9/"] });
    producer = new RmsProducer({ baseUrl: process.env.RMS_URL!, apiKey: shop.api_key, checkUrl: "http://127.0.0.1:9/check" });
    await producer.send({ topic, payload: 0 });
  });

  async function gap(leave: boolean): Promise<number> {
    const app = await createApp(`${PREFIX}-restart-${leave ? "leaving" : "staying"}`, { consume: [topic] });
    const first = new Member(app, topic, leave);
    try {
      await first.until((await producer.send({ topic, payload: 1 })).message_id);
    } finally {
      await first.terminate();
    }
    const restarted = new Member(app, topic, leave);
    try {
      const handled = await restarted.until((await producer.send({ topic, payload: 2 })).message_id);
      return handled - restarted.started;
    } finally {
      await restarted.terminate();
    }
  }

  it("leaves its group on SIGTERM with stopOnSignals, so a restarted process gets its partition at once", { timeout: 240_000 }, async () => {
    const staying = await gap(false);
    const leaving = await gap(true);
    console.log(`restart gap after SIGTERM: without stopOnSignals ${(staying / 1000).toFixed(1)} s, with it ${(leaving / 1000).toFixed(1)} s`);
    assert.ok(leaving < LEAVING_BOUND_MS, `a consumer that left its group waited ${leaving} ms`);
  });
});
