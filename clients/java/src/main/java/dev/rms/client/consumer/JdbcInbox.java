package dev.rms.client.consumer;

import dev.rms.client.internal.SqlNames;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/**
 * The idempotent inbox on JDBC and PostgreSQL: a handler runs at most once per message id.
 * In one transaction of the consumer's database it inserts the id ({@code INSERT ... ON
 * CONFLICT DO NOTHING RETURNING}) and runs the handler on the same connection; when the id was
 * there already the record is a redelivery and the handler is skipped; when the handler throws,
 * the transaction rolls back, inbox row included, so the message is processed when it comes
 * again.
 */
public final class JdbcInbox {
  public static final String DEFAULT_TABLE = "rms_inbox";
  private static final System.Logger LOG = System.getLogger(JdbcInbox.class.getName());

  private final DataSource dataSource;
  private final String table;

  public JdbcInbox(DataSource dataSource, String table) {
    this.dataSource = dataSource;
    this.table = SqlNames.table(table);
  }

  public JdbcInbox(DataSource dataSource) {
    this(dataSource, DEFAULT_TABLE);
  }

  /** The table's DDL, for your own migrations. */
  public String createTableSql() {
    return "CREATE TABLE IF NOT EXISTS " + table + " (message_id text PRIMARY KEY, "
        + "topic text NOT NULL, processed_at timestamptz NOT NULL DEFAULT now())";
  }

  public void createTable() throws SQLException {
    try (Connection conn = dataSource.getConnection(); Statement st = conn.createStatement()) {
      st.execute(createTableSql());
    }
  }

  /** Runs {@code handler} for {@code record} unless its id was processed before. */
  public Outcome process(RmsRecord record, InboxHandler handler) {
    try (Connection conn = dataSource.getConnection()) {
      conn.setAutoCommit(false);
      try {
        if (!claim(conn, record)) {
          conn.rollback();
          return Outcome.DUPLICATE;
        }
        handler.handle(conn, record);
        conn.commit();
        return Outcome.PROCESSED;
      } catch (Exception e) {
        conn.rollback();
        throw e;
      }
    } catch (Exception e) { // the caller's code: any failure means "not processed"
      LOG.log(System.Logger.Level.WARNING, "handler failed for message " + record.messageId()
          + " (delivery " + record.delivery() + ")", e);
      return Outcome.FAILED;
    }
  }

  /** True when the id was new (this transaction now holds its inbox row). */
  private boolean claim(Connection conn, RmsRecord record) throws SQLException {
    try (PreparedStatement st = conn.prepareStatement("INSERT INTO " + table
        + " (message_id, topic) VALUES (?, ?) ON CONFLICT (message_id) DO NOTHING"
        + " RETURNING message_id")) {
      st.setString(1, record.messageId());
      st.setString(2, record.topic());
      try (ResultSet inserted = st.executeQuery()) {
        return inserted.next();
      }
    }
  }
}
