package dev.rms.client.barrier;

import dev.rms.client.checkback.CheckRequest;
import dev.rms.client.checkback.CheckStatus;
import dev.rms.client.checkback.TransactionCheckRequest;
import dev.rms.client.internal.SqlNames;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import javax.sql.DataSource;

/**
 * The check-back barrier on JDBC and PostgreSQL (DTM's idea), so a check-back never has to
 * answer an ambiguous {@code unknown}.
 *
 * <p>The local transaction inserts {@code (id, 'committed')} into the barrier table, first
 * thing ({@link #markCommitted}). The check-back inserts {@code (id, 'rolled_back')} if absent
 * ({@link #check}):
 *
 * <ul>
 *   <li>the local transaction committed: the row is there, the answer is {@code committed};
 *   <li>it is still open: the insert waits on its uncommitted row (a unique-index wait) and then
 *       answers what happened, {@code committed} after its commit, {@code rolled_back} after its
 *       rollback;
 *   <li>it rolled back or never started (the producer died after the prepare): the insert
 *       succeeds, the answer is {@code rolled_back} and stays true, because the late local
 *       transaction's own insert now fails ({@link BarrierClosedException}) and takes it down.
 * </ul>
 *
 * A wait longer than the lock timeout answers {@code unknown} (RMS asks again later). A
 * transaction of several messages is marked with its transaction id (message and transaction
 * ids share the table, so keep them distinct).
 */
public final class JdbcBarrier {
  public static final String DEFAULT_TABLE = "rms_barrier";
  private static final String UNIQUE_VIOLATION = "23505";
  private static final String LOCK_NOT_AVAILABLE = "55P03";

  private final DataSource dataSource;
  private final String table;
  private final long lockTimeoutMillis;

  public JdbcBarrier(DataSource dataSource, String table, Duration lockTimeout) {
    this.dataSource = dataSource;
    this.table = SqlNames.table(table);
    this.lockTimeoutMillis = Math.max(1, lockTimeout.toMillis());
  }

  /** The default table {@value #DEFAULT_TABLE} and a 10 s lock timeout. */
  public JdbcBarrier(DataSource dataSource) {
    this(dataSource, DEFAULT_TABLE, Duration.ofSeconds(10));
  }

  /** The table's DDL, for your own migrations. */
  public String createTableSql() {
    return "CREATE TABLE IF NOT EXISTS " + table + " (message_id text PRIMARY KEY, "
        + "outcome text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())";
  }

  /** Creates the table if it is missing. */
  public void createTable() throws SQLException {
    try (Connection conn = dataSource.getConnection(); Statement st = conn.createStatement()) {
      st.execute(createTableSql());
    }
  }

  /**
   * Inside the local transaction ({@code conn} with auto-commit off), before its other work,
   * so a concurrent check-back waits for its outcome.
   *
   * @throws BarrierClosedException when the check-back already answered rolled_back: the
   *     transaction is then unusable and must roll back
   */
  public void markCommitted(Connection conn, String id) throws SQLException {
    if (conn.getAutoCommit()) {
      throw new IllegalStateException("markCommitted belongs inside the local transaction: "
          + "turn auto-commit off");
    }
    try (PreparedStatement st = conn.prepareStatement(
        "INSERT INTO " + table + " (message_id, outcome) VALUES (?, 'committed')")) {
      st.setString(1, id);
      st.executeUpdate();
    } catch (SQLException e) {
      if (UNIQUE_VIOLATION.equals(e.getSQLState())) {
        throw new BarrierClosedException(id, e);
      }
      throw e;
    }
  }

  /** The outcome of {@code id}'s local transaction, waiting while it is open. */
  public CheckStatus check(String id) throws SQLException {
    try (Connection conn = dataSource.getConnection()) {
      conn.setAutoCommit(false);
      conn.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
      try {
        CheckStatus status = settle(conn, id);
        conn.commit();
        return status;
      } catch (SQLException e) {
        conn.rollback();
        if (LOCK_NOT_AVAILABLE.equals(e.getSQLState())) {
          return CheckStatus.UNKNOWN;
        }
        throw e;
      }
    }
  }

  /** A message resolver for {@link dev.rms.client.checkback.CheckBackHandler}. */
  public CheckStatus resolve(CheckRequest request) throws SQLException {
    return check(request.messageId());
  }

  /** The transaction resolver: the local transaction marked with the transaction id. */
  public CheckStatus resolveTransaction(TransactionCheckRequest request) throws SQLException {
    return check(request.transactionId());
  }

  private CheckStatus settle(Connection conn, String id) throws SQLException {
    try (Statement st = conn.createStatement()) {
      st.execute("SET LOCAL lock_timeout = " + lockTimeoutMillis);
    }
    try (PreparedStatement st = conn.prepareStatement("INSERT INTO " + table
        + " (message_id, outcome) VALUES (?, 'rolled_back') ON CONFLICT (message_id) DO NOTHING"
        + " RETURNING outcome")) {
      st.setString(1, id);
      try (ResultSet closed = st.executeQuery()) {
        if (closed.next()) {
          return CheckStatus.ROLLED_BACK;
        }
      }
    }
    // a new statement, so a new snapshot (READ COMMITTED): it sees the row whose transaction
    // the insert above waited for
    try (PreparedStatement st = conn.prepareStatement(
        "SELECT outcome FROM " + table + " WHERE message_id = ?")) {
      st.setString(1, id);
      try (ResultSet row = st.executeQuery()) {
        String outcome = row.next() ? row.getString(1) : null;
        if ("committed".equals(outcome)) {
          return CheckStatus.COMMITTED;
        }
        return "rolled_back".equals(outcome) ? CheckStatus.ROLLED_BACK : CheckStatus.UNKNOWN;
      }
    }
  }
}
