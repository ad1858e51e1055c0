// Check-back server on the JDK's com.sun.net.httpserver; verifies RMS's signature with Maven
// com.standardwebhooks:standardwebhooks. The JDK server always frames its answers (length or
// chunked) and sends 100 Continue only by itself: "close" and "continue" are not served here.
import com.standardwebhooks.Webhook;
import com.standardwebhooks.exceptions.WebhookVerificationException;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

public final class CheckServer {
  private static final byte[] BODY = "{\"status\": \"committed\"}".getBytes(StandardCharsets.UTF_8);

  public static void main(String[] args) throws IOException {
    Webhook webhook = new Webhook(System.getenv("SIGNING_SECRET"));
    Path calls = Path.of(System.getenv("CALLS_FILE"));
    HttpServer server = HttpServer.create(
        new InetSocketAddress("127.0.0.1", Integer.parseInt(System.getenv("PORT"))), 64);
    server.createContext("/", exchange -> handle(exchange, webhook, calls));
    server.start();
    System.out.println("LISTENING " + server.getAddress().getPort());
    System.out.flush();
  }

  private static void handle(HttpExchange exchange, Webhook webhook, Path calls)
      throws IOException {
    String payload = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    Files.writeString(calls, "call\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    try {
      webhook.verify(payload, exchange.getRequestHeaders());
    } catch (WebhookVerificationException e) {
      exchange.sendResponseHeaders(401, -1);
      exchange.close();
      return;
    }
    String mode = exchange.getRequestURI().getPath().substring(1);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    if (mode.equals("connection-close")) {
      exchange.getResponseHeaders().set("Connection", "close");
    }
    boolean chunked = mode.equals("chunked");
    exchange.sendResponseHeaders(200, chunked ? 0 : BODY.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(BODY, 0, 5);
      out.flush();
      out.write(BODY, 5, BODY.length - 5);
    }
  }
}
