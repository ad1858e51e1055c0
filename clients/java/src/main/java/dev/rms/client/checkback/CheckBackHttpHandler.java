package dev.rms.client.checkback;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * The check-back endpoint on the JDK's own {@code com.sun.net.httpserver.HttpServer}:
 *
 * <pre>{@code
 * server.createContext("/rms/check", new CheckBackHttpHandler(handler));
 * }</pre>
 *
 * Only POST is served (405 otherwise); a body over {@link #MAX_BODY_BYTES} answers 413.
 */
public final class CheckBackHttpHandler implements HttpHandler {
  /** RMS's check-back bodies are small; anything larger is not one. */
  public static final int MAX_BODY_BYTES = 1 << 20;

  private final CheckBackHandler handler;

  public CheckBackHttpHandler(CheckBackHandler handler) {
    this.handler = handler;
  }

  @Override
  public void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      CheckBackResponse response;
      if (!"POST".equals(exchange.getRequestMethod())) {
        exchange.getResponseHeaders().set("Allow", "POST");
        response = CheckBackHandler.problem(405, "Method not allowed", "check-backs are POSTs");
      } else {
        byte[] body = readAtMost(exchange.getRequestBody(), MAX_BODY_BYTES);
        response = body == null
            ? CheckBackHandler.problem(413, "Body too large", "a check-back body is small")
            : handler.handle(exchange.getRequestHeaders(), body);
      }
      exchange.getResponseHeaders().set("Content-Type", response.contentType());
      exchange.sendResponseHeaders(response.status(), response.body().length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(response.body());
      }
    }
  }

  /** The whole body, or null when it is longer than {@code limit}. */
  static byte[] readAtMost(InputStream in, int limit) throws IOException {
    byte[] body = in.readNBytes(limit + 1);
    return body.length > limit ? null : body;
  }
}
