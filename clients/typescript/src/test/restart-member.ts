// One consumer process of restart.live.test.ts, run only when RMS_RESTART_MEMBER is set (the
// test runner loads every module of this folder): it consumes as the app it is given, prints
// `handled <message id>` for each record, and stops on SIGTERM when told to.
import { HttpAcker, Inbox, RmsConsumer } from "../index.js";
import { kafka, pool } from "./live.js";

const spec = process.env.RMS_RESTART_MEMBER?.split(" ");
if (spec !== undefined) {
  const [app, apiKey, topic, leave] = spec as [string, string, string, string];
  const inbox = new Inbox(pool(), { table: "restart_inbox" });
  await inbox.ensure();
  const consumer = new RmsConsumer({
    app, kafka: kafka(app), topics: [topic], inbox, handler: async (_client, record) => {
      process.stdout.write(`handled ${record.messageId}\n`);
    },
    acker: new HttpAcker({ baseUrl: process.env.RMS_URL!, apiKey }),
    stopOnSignals: leave === "leave" ? ["SIGTERM"] : undefined,
  });
  if (leave !== "leave") process.once("SIGTERM", () => process.exit(143)); // ends without leaving
  await consumer.start();
}
