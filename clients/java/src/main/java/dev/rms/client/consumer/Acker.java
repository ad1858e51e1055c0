package dev.rms.client.consumer;

/** Acknowledges messages to RMS: over HTTP ({@link HttpAcker}) or the ack topic ({@link
 * TopicAcker}). */
public interface Acker extends AutoCloseable {
  Ack ack(String messageId);

  @Override
  void close();
}
