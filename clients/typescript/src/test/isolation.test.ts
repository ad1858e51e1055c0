import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Kafka } from "kafkajs";

import { RmsConsumer } from "../index.js";

describe("isolation level", () => {
  it("reads committed records only: a transaction's records arrive all or none", () => {
    let asked: Record<string, unknown> | undefined;
    const kafka = { consumer: (config: Record<string, unknown>) => { asked = config; return {}; } } as unknown as Kafka;
    const options = { app: "points", kafka, topics: ["orders"], handler: async () => undefined } as unknown;
    new RmsConsumer(options as ConstructorParameters<typeof RmsConsumer>[0]);
    assert.equal(asked?.readUncommitted, false);
  });
});
