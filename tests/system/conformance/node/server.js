// Check-back server on Node's http module; verifies RMS's signature with npm standardwebhooks.
"use strict";
const http = require("http");
const fs = require("fs");
const { Webhook } = require("standardwebhooks");

const BODY = '{"status": "committed"}';
const webhook = new Webhook(process.env.SIGNING_SECRET.replace(/^whsec_/, ""));

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    fs.appendFileSync(process.env.CALLS_FILE, "call\n");
    const body = Buffer.concat(chunks).toString("utf8");
    try {
      webhook.verify(body, req.headers);
    } catch (err) {
      res.writeHead(401, { "content-length": "0" });
      res.end();
      return;
    }
    const mode = req.url.replace(/^\//, "");
    if (mode === "continue") res.writeContinue();
    if (mode === "chunked") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(BODY.slice(0, 5));
      res.end(BODY.slice(5));
    } else if (mode === "close") {
      res.useChunkedEncodingByDefault = false;
      res.shouldKeepAlive = false;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(BODY);
    } else {
      const headers = { "content-type": "application/json", "content-length": BODY.length };
      if (mode === "connection-close") headers.connection = "close";
      res.writeHead(200, headers);
      res.end(BODY);
    }
  });
});
server.listen(Number(process.env.PORT), "127.0.0.1", () => {
  console.log(`LISTENING ${server.address().port}`);
});
