package dev.rms.client.consumer;

/** What the consumer did with a record. */
public enum Outcome {
  /** The handler ran and committed together with the inbox row. */
  PROCESSED,
  /** The inbox had the id already (a redelivery): the handler was skipped. */
  DUPLICATE,
  /** The handler (or the database) failed: rolled back, not acknowledged. */
  FAILED,
  /**
   * The record's {@code rms-awaiting} header does not name the consumer's app, which
   * acknowledged the message already: neither handled nor acknowledged.
   */
  NOT_AWAITED;

  /** Whether the message is to be acknowledged (a duplicate too: the first ack may be lost). */
  public boolean acks() {
    return this == PROCESSED || this == DUPLICATE;
  }
}
