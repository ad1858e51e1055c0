package dev.rms.client.consumer;

import java.util.List;

/**
 * What one poll did: each RMS record with its outcome (in order; {@link Outcome#NOT_AWAITED} for
 * one meant for other apps only), the acks sent, and how many records were skipped for lacking
 * {@code rms-message-id} (not published by RMS).
 */
public record BatchReport(List<Handled> handled, List<Ack> acks, int skipped) {
  /** One record and what the consumer did with it. */
  public record Handled(RmsRecord record, Outcome outcome) {}

  public long count(Outcome outcome) {
    return handled.stream().filter(h -> h.outcome() == outcome).count();
  }
}
