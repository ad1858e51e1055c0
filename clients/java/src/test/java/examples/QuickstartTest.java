package examples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.LiveRms;
import java.net.ServerSocket;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The README's example runs as shown against the live RMS. */
class QuickstartTest {
  @Test
  void theQuickstartPreparesCommitsAndConfirms() throws Exception {
    LiveRms rms = LiveRms.get();
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    LiveRms.App app = rms.createApp("orders", List.of("orders.paid"), List.of(),
        "http://127.0.0.1:" + port + "/");
    String jdbcUrl = "jdbc:postgresql://" + System.getenv("RMS_TEST_PG_HOST") + ":"
        + System.getenv("RMS_TEST_PG_PORT") + "/" + System.getenv("RMS_TEST_PG_DATABASE")
        + "?user=" + System.getenv("RMS_TEST_PG_USER");
    String password = System.getenv("RMS_TEST_PG_PASSWORD");
    if (password != null && !password.isEmpty()) {
      jdbcUrl += "&password=" + password;
    }
    String line = Quickstart.run(rms.url.toString(), app.apiKey(), app.signingSecret(), jdbcUrl,
        port);
    assertTrue(line.matches("[0-9a-f]{26} orders\\.paid sent"), line);
  }
}
