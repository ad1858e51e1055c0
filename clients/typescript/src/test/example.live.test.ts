// The README's example (examples/quickstart.mjs) runs as a user would run it, against the
// live RMS, importing the package by its name.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, it } from "node:test";

import { createApp, PREFIX, skipLive } from "./live.js";

const PACKAGE = fileURLToPath(new URL("../../", import.meta.url));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("the README's example (live RMS)", { skip: skipLive }, () => {
  it("prepares, commits locally and confirms", async () => {
    const port = await freePort();
    const topic = `quick.${PREFIX}`;
    const app = await createApp(`${PREFIX}-quickstart`, { produce: [topic], checkPrefixes: [`http://127.0.0.1:${port}/`] });
    const { stdout } = await promisify(execFile)(process.execPath, ["examples/quickstart.mjs"], {
      cwd: PACKAGE, timeout: 60_000,
      env: { ...process.env, DATABASE_URL: process.env.RMS_TEST_DATABASE_URL, RMS_API_KEY: app.api_key,
             RMS_SIGNING_SECRET: app.signing_secret, CHECK_PORT: String(port), TOPIC: topic },
    });
    process.stdout.write(stdout);
    assert.match(stdout, /^prepared order-\d+-paid: pending-send\nconfirmed order-\d+-paid: sent, delivery 1\n$/);
  });
});
