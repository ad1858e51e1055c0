package dev.rms.client.consumer;

/**
 * The result of acknowledging one message.
 *
 * @param status the HTTP status when RMS answered (0 otherwise)
 * @param detail why it was refused or failed (null when acked)
 */
public record Ack(String messageId, Result result, int status, String detail) {
  /** How an acknowledgement ended. */
  public enum Result {
    /** RMS has the ack (or, for the ack topic, the broker holds the record). */
    ACKED,
    /** RMS said no for good (unknown id, a topic this app may not consume, ...). */
    REFUSED,
    /** RMS or the broker could not be reached: RMS redelivers, and the ack comes again. */
    FAILED
  }
}
