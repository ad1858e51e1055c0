package dev.rms.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.sun.net.httpserver.HttpServer;
import dev.rms.client.producer.RmsProducer;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class VersionTest {
  @Test
  void everyRequestNamesTheLibraryAndItsReleaseAsUserAgent() throws Exception {
    List<String> agents = new CopyOnWriteArrayList<>();
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", exchange -> {
      agents.add(exchange.getRequestHeaders().getFirst("User-Agent"));
      byte[] body = "{\"title\":\"Not Found\",\"status\":404}".getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().set("Content-Type", "application/problem+json");
      exchange.sendResponseHeaders(404, body.length);
      exchange.getResponseBody().write(body);
      exchange.close();
    });
    server.start();
    try {
      RmsProducer rms = RmsProducer.builder(
          URI.create("http://127.0.0.1:" + server.getAddress().getPort()), "key").build();
      assertThrows(RmsNotFoundException.class, () -> rms.get("order-1-paid"));
    } finally {
      server.stop(0);
    }
    assertEquals("rms-client-java/" + Version.RELEASE, Version.USER_AGENT);
    assertEquals(List.of(Version.USER_AGENT), agents);
  }
}
