// Every request names the library and its release in User-Agent, over real HTTP.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { RmsNotFoundError, RmsProducer, USER_AGENT, VERSION } from "../index.js";

describe("User-Agent", () => {
  it("is rms-client-typescript/<release>", async () => {
    const agents: (string | undefined)[] = [];
    const server = createServer((request, response) => {
      agents.push(request.headers["user-agent"]);
      response.writeHead(404, { "content-type": "application/problem+json" });
      response.end(JSON.stringify({ title: "Not Found", status: 404 }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const rms = new RmsProducer({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "key" });
      await assert.rejects(rms.get("order-1-paid"), RmsNotFoundError);
    } finally {
      server.close();
    }
    assert.equal(USER_AGENT, `rms-client-typescript/${VERSION}`);
    assert.deepEqual(agents, [USER_AGENT]);
  });
});
