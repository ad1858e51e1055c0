// The live RMS, PostgreSQL and Kafka of the test harness (tests/system/clients/fixtures.py).
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

import kafkajs from "kafkajs";
import pg from "pg";

const env = process.env;
const NEEDED = ["RMS_URL", "RMS_ADMIN_TOKEN", "RMS_KAFKA_BOOTSTRAP_SERVERS", "RMS_ACK_TOPIC",
                "RMS_TEST_DATABASE_URL", "RMS_TEST_PREFIX"];
const missing = NEEDED.filter((name) => !env[name]);

/** Why the live tests cannot run here (false when they can). Under the harness
 * (`RMS_LIVE_REQUIRED=1`) a missing variable is an error, never a skip. */
export const skipLive: string | false = missing.length === 0 ? false
  : `no live RMS: ${missing.join(", ")} unset (run through tests/system/clients/test_typescript.py)`;
if (skipLive && env.RMS_LIVE_REQUIRED === "1") throw new Error(skipLive);

export const RMS_URL = env.RMS_URL ?? "";
export const ACK_TOPIC = env.RMS_ACK_TOPIC ?? "";
export const PREFIX = env.RMS_TEST_PREFIX ?? "";

export interface App {
  name: string;
  api_key: string;
  signing_secret: string;
}

/** A new app; `checkPrefixes` are full origins (RMS matches scheme, host and port exactly). */
export async function createApp(name: string, topics: { produce?: string[]; consume?: string[]; checkPrefixes?: string[] }): Promise<App> {
  const response = await fetch(`${RMS_URL}/v1/admin/apps`, {
    method: "POST",
    headers: { authorization: `Bearer ${env.RMS_ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ name, produce_topics: topics.produce ?? [], consume_topics: topics.consume ?? [],
                           check_url_prefixes: topics.checkPrefixes ?? [] }),
  });
  if (response.status !== 201) throw new Error(`creating app ${name}: ${response.status} ${await response.text()}`);
  return (await response.json()) as App;
}

export function pool(): pg.Pool {
  return new pg.Pool({ connectionString: env.RMS_TEST_DATABASE_URL, max: 8 });
}

export function kafka(clientId: string): kafkajs.Kafka {
  return new kafkajs.Kafka({ clientId, brokers: (env.RMS_KAFKA_BOOTSTRAP_SERVERS ?? "").split(","),
                             logLevel: kafkajs.logLevel.WARN });
}

/** A server on a free port of 127.0.0.1. */
export async function serve(listener: RequestListener): Promise<{ server: Server; url: string }> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** `probe()`'s first truthy value, polled until `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>,
                                 timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    await sleep(200);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}
