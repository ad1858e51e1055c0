package dev.rms.client.barrier;

import java.sql.SQLException;

/**
 * The check-back already answered {@code rolled_back} for this id: the local transaction must
 * not commit (RMS has deleted the message, so it will never be delivered). Roll it back.
 */
public class BarrierClosedException extends SQLException {
  private static final long serialVersionUID = 1L;

  public BarrierClosedException(String id, SQLException cause) {
    super("'" + id + "' was already resolved as rolled back by the check-back; this transaction "
        + "must not commit", cause.getSQLState(), cause.getErrorCode(), cause);
  }
}
