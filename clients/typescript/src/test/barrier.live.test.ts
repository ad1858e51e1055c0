// The barrier on the harness's PostgreSQL: a check-back that comes while the local
// transaction is still open waits for it and answers its outcome (or `unknown` past the lock
// timeout), never a wrong `rolled_back`.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, it } from "node:test";

import type pg from "pg";

import { Barrier, BarrierClosedError, barrierDdl } from "../index.js";
import { PREFIX, pool, skipLive } from "./live.js";

describe("barrier (PostgreSQL)", { skip: skipLive }, () => {
  let db: pg.Pool;
  let barrier: Barrier;

  before(async () => {
    db = pool();
    barrier = new Barrier(db, { table: "open_barrier", lockTimeoutMs: 3000 });
    await barrier.createTable();
  });

  after(async () => {
    await db?.end();
  });

  /** A local transaction that marks `id` and stays open until `finish` is called. */
  async function openTransaction(id: string): Promise<(outcome: "COMMIT" | "ROLLBACK") => Promise<void>> {
    const client = await db.connect();
    await client.query("BEGIN");
    await barrier.markCommitted(client, id);
    return async (outcome) => {
      await client.query(outcome);
      client.release();
    };
  }

  it("waits for a local transaction still running and answers committed after its commit", async () => {
    const finish = await openTransaction(`${PREFIX}-open-1`);
    const answer = barrier.check(`${PREFIX}-open-1`);
    await sleep(300);
    await finish("COMMIT");
    assert.equal(await answer, "committed");
  });

  it("answers rolled_back after a rollback, and the id stays closed", async () => {
    const finish = await openTransaction(`${PREFIX}-open-2`);
    const answer = barrier.check(`${PREFIX}-open-2`);
    await sleep(300);
    await finish("ROLLBACK");
    assert.equal(await answer, "rolled_back");
    await assert.rejects(barrier.run(`${PREFIX}-open-2`, async () => "late"), BarrierClosedError);
  });

  it("answers unknown when the local transaction outlasts the lock timeout", async () => {
    const impatient = new Barrier(db, { table: "open_barrier", lockTimeoutMs: 200 });
    const finish = await openTransaction(`${PREFIX}-open-3`);
    try {
      assert.equal(await impatient.check(`${PREFIX}-open-3`), "unknown");
    } finally {
      await finish("COMMIT");
    }
    assert.equal(await impatient.check(`${PREFIX}-open-3`), "committed");
  });

  it("refuses table names that are not plain identifiers", () => {
    assert.throws(() => barrierDdl("x; DROP TABLE y"), /must match/);
    assert.throws(() => new Barrier(db, { table: "Bad-Name" }), TypeError);
  });
});
