package dev.rms.client.signing;

import com.standardwebhooks.Webhook;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Checks Standard Webhooks headers against any of several signing secrets (a rotation overlap)
 * and a timestamp tolerance (default 5 minutes, either side). Replays within the tolerance are
 * the caller's concern ({@link dev.rms.client.checkback.ReplayGuard}), since remembering ids
 * needs storage.
 */
public final class Verifier {
  public static final Duration DEFAULT_TOLERANCE = Duration.ofMinutes(5);

  private final List<Webhook> webhooks;
  private final Duration tolerance;
  private final Clock clock;

  public Verifier(List<String> secrets, Duration tolerance, Clock clock) {
    if (secrets.isEmpty()) {
      throw new IllegalArgumentException("at least one signing secret is needed");
    }
    this.webhooks = secrets.stream().map(Signatures::webhook).toList();
    this.tolerance = tolerance;
    this.clock = clock;
  }

  public Verifier(List<String> secrets) {
    this(secrets, DEFAULT_TOLERANCE, Clock.systemUTC());
  }

  /** What a verified request proved: its id (for replay checks) and when it was signed. */
  public record Verified(String webhookId, Instant timestamp) {}

  /** Throws unless {@code body} carries a valid, fresh signature; header names in any case. */
  public Verified verify(Map<String, List<String>> headers, byte[] body)
      throws SignatureException {
    String id = first(headers, Signatures.HEADER_ID);
    String stamp = first(headers, Signatures.HEADER_TIMESTAMP);
    String signatures = first(headers, Signatures.HEADER_SIGNATURE);
    List<String> missing = new ArrayList<>();
    if (id == null) {
      missing.add(Signatures.HEADER_ID);
    }
    if (stamp == null) {
      missing.add(Signatures.HEADER_TIMESTAMP);
    }
    if (signatures == null) {
      missing.add(Signatures.HEADER_SIGNATURE);
    }
    if (!missing.isEmpty()) {
      throw new SignatureException("missing header(s): " + String.join(", ", missing));
    }
    long timestamp = timestamp(stamp);
    long skew = Math.abs(clock.instant().getEpochSecond() - timestamp);
    if (skew > tolerance.toSeconds()) {
      throw new SignatureException("webhook-timestamp " + timestamp + " is outside the "
          + tolerance.toSeconds() + "s tolerance");
    }
    for (Webhook webhook : webhooks) {
      byte[] expected = Signatures.sign(webhook, id, timestamp, body)
          .substring(3).getBytes(StandardCharsets.US_ASCII);
      for (String given : v1Signatures(signatures)) {
        if (MessageDigest.isEqual(expected, given.getBytes(StandardCharsets.US_ASCII))) {
          return new Verified(id, Instant.ofEpochSecond(timestamp));
        }
      }
    }
    throw new SignatureException("no webhook-signature matches a known signing secret");
  }

  private static long timestamp(String value) throws SignatureException {
    try {
      return Long.parseLong(value.trim());
    } catch (NumberFormatException e) {
      throw new SignatureException("webhook-timestamp '" + value + "' is not unix seconds");
    }
  }

  /** The {@code v1} entries; other versions are ignored, as the specification asks. */
  private static List<String> v1Signatures(String header) {
    List<String> found = new ArrayList<>();
    for (String entry : header.trim().split("\\s+")) {
      if (entry.startsWith("v1,")) {
        found.add(entry.substring(3));
      }
    }
    return found;
  }

  static String first(Map<String, List<String>> headers, String name) {
    for (Map.Entry<String, List<String>> entry : headers.entrySet()) {
      if (entry.getKey() != null && entry.getKey().equalsIgnoreCase(name)
          && entry.getValue() != null && !entry.getValue().isEmpty()) {
        String value = entry.getValue().get(0);
        return value == null || value.isEmpty() ? null : value;
      }
    }
    return null;
  }
}
