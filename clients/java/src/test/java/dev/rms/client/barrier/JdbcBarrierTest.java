package dev.rms.client.barrier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.rms.client.LiveRms;
import dev.rms.client.checkback.CheckStatus;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The barrier on PostgreSQL: "still running" is told from "rolled back". */
class JdbcBarrierTest {
  private static DataSource db;
  private static JdbcBarrier barrier;

  @BeforeAll
  static void table() throws SQLException {
    LiveRms.get();
    db = LiveRms.dataSource();
    barrier = new JdbcBarrier(db, "barrier_test", Duration.ofSeconds(5));
    barrier.createTable();
  }

  private static String id() {
    return "b-" + UUID.randomUUID();
  }

  private static Connection open() throws SQLException {
    Connection conn = db.getConnection();
    conn.setAutoCommit(false);
    return conn;
  }

  @Test
  void aCommittedTransactionIsCommitted() throws SQLException {
    String id = id();
    try (Connection conn = open()) {
      barrier.markCommitted(conn, id);
      conn.commit();
    }
    assertEquals(CheckStatus.COMMITTED, barrier.check(id));
    assertEquals(CheckStatus.COMMITTED, barrier.check(id), "and stays so");
  }

  @Test
  void aTransactionThatNeverRanIsRolledBackForGood() throws SQLException {
    String id = id();
    assertEquals(CheckStatus.ROLLED_BACK, barrier.check(id));
    try (Connection conn = open()) {
      assertThrows(BarrierClosedException.class, () -> barrier.markCommitted(conn, id));
      conn.rollback();
    }
    assertEquals(CheckStatus.ROLLED_BACK, barrier.check(id));
  }

  @Test
  void aCheckWaitsForAnOpenTransactionAndAnswersItsCommit() throws Exception {
    String id = id();
    try (Connection conn = open()) {
      barrier.markCommitted(conn, id);
      CompletableFuture<CheckStatus> check = CompletableFuture.supplyAsync(() -> check(id));
      Thread.sleep(300);
      assertFalse(check.isDone(), "the check waits while the local transaction is open");
      conn.commit();
      assertEquals(CheckStatus.COMMITTED, check.get(5, TimeUnit.SECONDS));
    }
  }

  @Test
  void aCheckWaitsForAnOpenTransactionAndAnswersItsRollback() throws Exception {
    String id = id();
    try (Connection conn = open()) {
      barrier.markCommitted(conn, id);
      CompletableFuture<CheckStatus> check = CompletableFuture.supplyAsync(() -> check(id));
      Thread.sleep(300);
      assertFalse(check.isDone());
      conn.rollback();
      assertEquals(CheckStatus.ROLLED_BACK, check.get(5, TimeUnit.SECONDS));
    }
  }

  @Test
  void aWaitLongerThanTheLockTimeoutIsUnknown() throws SQLException {
    JdbcBarrier impatient = new JdbcBarrier(db, "barrier_test", Duration.ofMillis(200));
    String id = id();
    try (Connection conn = open()) {
      barrier.markCommitted(conn, id);
      assertEquals(CheckStatus.UNKNOWN, impatient.check(id));
      conn.commit();
    }
    assertEquals(CheckStatus.COMMITTED, impatient.check(id));
  }

  @Test
  void markingOutsideATransactionIsRefused() throws SQLException {
    try (Connection conn = db.getConnection()) {
      assertThrows(IllegalStateException.class, () -> barrier.markCommitted(conn, id()));
    }
    assertThrows(IllegalArgumentException.class, () -> new JdbcBarrier(db, "x; drop table y",
        Duration.ofSeconds(1)));
  }

  private static CheckStatus check(String id) {
    try {
      return barrier.check(id);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
