package dev.rms.client.consumer;

/** Acknowledges messages to RMS: over HTTP ({@link HttpAcker}) or the ack topic ({@link
 * TopicAcker}). */
public interface Acker extends AutoCloseable {
  /**
   * Acknowledges {@code messageId}.
   *
   * @param createdAt the acknowledged record's {@code rms-created-at} header as it came ({@link
   *     RmsRecord#createdAt()}; null when unknown): it binds an ack record to that instance of
   *     the message id (design section 6)
   */
  Ack ack(String messageId, String createdAt);

  /** Acknowledges the record's message: its id and its {@code rms-created-at}. */
  default Ack ack(RmsRecord record) {
    return ack(record.messageId(), record.createdAt());
  }

  @Override
  void close();
}
