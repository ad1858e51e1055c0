package dev.rms.client.consumer;

/** What the inbox did with a record. */
public enum Outcome {
  /** The handler ran and committed together with the inbox row. */
  PROCESSED,
  /** The inbox had the id already (a redelivery): the handler was skipped. */
  DUPLICATE,
  /** The handler (or the database) failed: rolled back, not acknowledged. */
  FAILED;

  /** Whether the message is to be acknowledged (a duplicate too: the first ack may be lost). */
  public boolean acks() {
    return this != FAILED;
  }
}
