package dev.rms.client.checkback;

import java.nio.charset.StandardCharsets;

/** The answer to write back: status, content type and body. */
public record CheckBackResponse(int status, String contentType, byte[] body) {
  /** The body as text (UTF-8). */
  public String text() {
    return new String(body, StandardCharsets.UTF_8);
  }
}
