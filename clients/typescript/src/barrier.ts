/**
 * The check-back barrier on PostgreSQL with `pg` (DTM's idea), so a check-back never has to
 * answer an ambiguous `unknown`.
 *
 * The local transaction inserts `(id, 'committed')` into the barrier table, first thing. The
 * check-back inserts `(id, 'rolled_back')` if absent:
 *
 * - the local transaction committed: the row is there, the answer is `committed`;
 * - it is still open: the insert waits on its uncommitted row (a unique-index wait), then
 *   answers what happened: `committed` after its commit, `rolled_back` after its rollback;
 * - it rolled back, or never started (the producer died after prepare): the insert succeeds,
 *   the answer is `rolled_back` and stays true, because the late local transaction's own
 *   insert now fails ({@link BarrierClosedError}) and takes the transaction down with it.
 *
 * A wait longer than `lockTimeoutMs` answers `unknown` (RMS asks again later).
 *
 * ```ts
 * const barrier = new Barrier(pool);
 * await barrier.createTable();              // or put BARRIER_DDL in your migrations
 * await barrier.run(messageId, async (client) => {   // BEGIN, mark, work, COMMIT
 *   await client.query("UPDATE orders SET paid = true WHERE id = $1", [42]);
 * });
 * createCheckBackHandler({ secrets, resolve: barrier.resolve,
 *                          resolveTransaction: barrier.resolveTransaction });
 * ```
 *
 * A transaction of several messages is marked the same way, by its transaction id (message
 * ids and transaction ids share the table, so keep them distinct).
 */
import type { Pool, PoolClient } from "pg";

import type { CheckRequest, CheckStatus, TransactionCheckRequest } from "./checkback.js";

export const DEFAULT_BARRIER_TABLE = "rms_barrier";
const UNIQUE_VIOLATION = "23505";
const LOCK_NOT_AVAILABLE = "55P03";
const TABLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The barrier table's definition, for your own migrations. */
export function barrierDdl(table: string = DEFAULT_BARRIER_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${checkedName(table)} (
  message_id text PRIMARY KEY,
  outcome text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
)`;
}

export function checkedName(table: string): string {
  if (!TABLE_NAME.test(table)) throw new TypeError(`table name ${JSON.stringify(table)} must match ${TABLE_NAME}`);
  return table;
}

/** The check-back already answered `rolled_back` for this id: the local transaction must not
 * commit (RMS deleted the message, so it will never be delivered). */
export class BarrierClosedError extends Error {
  constructor(readonly id: string, options?: ErrorOptions) {
    super(`${JSON.stringify(id)} was already resolved as rolled back by check-back; this transaction must not commit`, options);
    this.name = "BarrierClosedError";
  }
}

export interface BarrierOptions {
  table?: string;
  /** How long a check-back waits for an open local transaction (default 10 s). */
  lockTimeoutMs?: number;
}

export class Barrier {
  private readonly pool: Pool;
  readonly table: string;
  private readonly lockTimeoutMs: number;

  constructor(pool: Pool, options: BarrierOptions = {}) {
    this.pool = pool;
    this.table = checkedName(options.table ?? DEFAULT_BARRIER_TABLE);
    this.lockTimeoutMs = Math.max(1, Math.floor(options.lockTimeoutMs ?? 10_000));
  }

  async createTable(): Promise<void> {
    await this.pool.query(barrierDdl(this.table));
  }

  /**
   * Inside the local transaction (`client` between BEGIN and COMMIT), before its other work,
   * so a concurrent check-back waits for the outcome. Throws {@link BarrierClosedError} when
   * check-back already said `rolled_back`; the transaction is then aborted and must roll back.
   */
  async markCommitted(client: PoolClient, id: string): Promise<void> {
    try {
      await client.query(`INSERT INTO ${this.table} (message_id, outcome) VALUES ($1, 'committed')`, [id]);
    } catch (error) {
      if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw new BarrierClosedError(id, { cause: error });
      throw error;
    }
  }

  /** The documented pattern in one call: BEGIN, {@link markCommitted}, `work`, COMMIT; ROLLBACK
   * when anything throws (and rethrow). */
  async run<T>(id: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      try {
        await this.markCommitted(client, id);
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    } finally {
      client.release();
    }
  }

  /** The outcome of `id`'s local transaction, waiting while it is open. */
  async check(id: string): Promise<CheckStatus> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN ISOLATION LEVEL READ COMMITTED");
      try {
        const status = await this.settle(client, id);
        await client.query("COMMIT");
        return status;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return "unknown";
        throw error;
      }
    } finally {
      client.release();
    }
  }

  /** A resolver for {@link createCheckBackHandler}: the message's local transaction. */
  readonly resolve = (check: CheckRequest): Promise<CheckStatus> => this.check(check.message_id);

  /** The transaction resolver: the local transaction marked with the transaction id. */
  readonly resolveTransaction = (check: TransactionCheckRequest): Promise<CheckStatus> =>
    this.check(check.transaction_id);

  private async settle(client: PoolClient, id: string): Promise<CheckStatus> {
    await client.query(`SET LOCAL lock_timeout = ${this.lockTimeoutMs}`);
    const closed = await client.query(
      `INSERT INTO ${this.table} (message_id, outcome) VALUES ($1, 'rolled_back')
       ON CONFLICT (message_id) DO NOTHING RETURNING outcome`, [id]);
    if (closed.rowCount) return "rolled_back";
    // a new statement, so a new snapshot (READ COMMITTED): it sees the row whose
    // transaction the insert above waited for
    const found = await client.query<{ outcome: string }>(
      `SELECT outcome FROM ${this.table} WHERE message_id = $1`, [id]);
    const outcome = found.rows[0]?.outcome;
    if (outcome === "committed") return "committed";
    return outcome === "rolled_back" ? "rolled_back" : "unknown";
  }
}
