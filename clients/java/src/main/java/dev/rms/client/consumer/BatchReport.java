package dev.rms.client.consumer;

import java.util.List;
import java.util.Map;

/**
 * What one poll did: each RMS record's outcome (by message id, in order), the acks sent, and how
 * many records were skipped for lacking {@code rms-message-id} (not published by RMS).
 */
public record BatchReport(List<Map.Entry<String, Outcome>> outcomes, List<Ack> acks,
    int skipped) {
  public long count(Outcome outcome) {
    return outcomes.stream().filter(e -> e.getValue() == outcome).count();
  }
}
