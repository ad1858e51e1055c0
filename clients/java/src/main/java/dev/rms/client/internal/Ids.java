package dev.rms.client.internal;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;

/** Message and transaction ids, and their place in a URL path. */
public final class Ids {
  private static final SecureRandom RANDOM = new SecureRandom();

  private Ids() {}

  /**
   * A 26-character time-ordered id (13 hex digits of milliseconds, 13 random hex digits), the
   * same shape RMS generates, so inserts stay index-local. Fixed before a call's first attempt,
   * it is what makes retries safe.
   */
  public static String newId() {
    byte[] random = new byte[7];
    RANDOM.nextBytes(random);
    String millis = String.format("%013x", System.currentTimeMillis());
    return millis + HexFormat.of().formatHex(random).substring(0, 13);
  }

  /** {@code id} as one URL path segment (RFC 3986: anything but unreserved characters escaped). */
  public static String segment(String id) {
    StringBuilder out = new StringBuilder();
    for (byte b : id.getBytes(StandardCharsets.UTF_8)) {
      char c = (char) (b & 0xff);
      boolean unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' || c == ':';
      out.append(unreserved ? String.valueOf(c) : String.format("%%%02X", b & 0xff));
    }
    return out.toString();
  }
}
