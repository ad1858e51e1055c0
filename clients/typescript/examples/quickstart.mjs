// Prepare → local commit → confirm, with the barrier and the check-back endpoint that
// resolve the message if this process dies between its commit and its confirm.
import http from "node:http";
import pg from "pg";
import { Barrier, RmsProducer, createCheckBackHandler, nodeCheckBackListener } from "rms-client";

const env = process.env;
const db = new pg.Pool({ connectionString: env.DATABASE_URL });
const barrier = new Barrier(db);
await barrier.createTable();
await db.query("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, paid boolean NOT NULL)");

const checkBack = createCheckBackHandler({ secrets: [env.RMS_SIGNING_SECRET], resolve: barrier.resolve,
                                           resolveTransaction: barrier.resolveTransaction });
const server = http.createServer(nodeCheckBackListener(checkBack)).listen(Number(env.CHECK_PORT), "127.0.0.1");

const rms = new RmsProducer({ baseUrl: env.RMS_URL, apiKey: env.RMS_API_KEY,
                              checkUrl: `http://127.0.0.1:${env.CHECK_PORT}/rms/check` });
const orderId = `order-${Date.now()}`;
const message = await rms.transactional({ topic: env.TOPIC, payload: { orderId }, messageId: `${orderId}-paid` },
  (prepared) => barrier.run(prepared.message_id, async (client) => {   // the local transaction
    console.log(`prepared ${prepared.message_id}: ${prepared.state}`);
    await client.query("INSERT INTO orders (id, paid) VALUES ($1, true)", [orderId]);
    return prepared;
  }));
const confirmed = await rms.get(message.message_id);
console.log(`confirmed ${confirmed.message_id}: ${confirmed.state}, delivery ${confirmed.delivery_count}`);
server.close();
await db.end();
