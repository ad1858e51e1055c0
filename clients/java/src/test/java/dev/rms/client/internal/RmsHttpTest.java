package dev.rms.client.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.RetryPolicy;
import dev.rms.client.RmsUnavailableException;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Retries over real sockets, against a scripted HTTP/1.1 server on 127.0.0.1: each connection
 * takes the next step of the script (answer, or close before any byte).
 */
class RmsHttpTest {
  private static final String MESSAGE = "{\"message_id\":\"m-1\",\"app\":\"a\",\"topic\":\"t\","
      + "\"state\":\"pending-send\",\"dead\":false,\"check_count\":0,\"delivery_count\":0,"
      + "\"created_at\":\"2026-11-26T09:00:00+00:00\",\"payload\":{}}";
  private static final String CLOSE = "close";

  private ScriptedServer server;

  @AfterEach
  void stop() throws IOException {
    server.close();
  }

  private RmsProducer producer(RetryPolicy retry) {
    return RmsProducer.builder(URI.create("http://127.0.0.1:" + server.port()), "key")
        .defaultCheckUrl("http://127.0.0.1:1/check").retry(retry)
        .timeout(Duration.ofSeconds(5)).build();
  }

  private static String answer(int status, Map<String, String> headers, String body) {
    StringBuilder text = new StringBuilder("HTTP/1.1 " + status + " X\r\n");
    headers.forEach((name, value) -> text.append(name).append(": ").append(value).append("\r\n"));
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    return text.append("Content-Type: application/json\r\nConnection: close\r\nContent-Length: ")
        .append(bytes.length).append("\r\n\r\n").append(body).toString();
  }

  @Test
  void aConnectionClosedBeforeAnyByteIsRetriedOnceWithTheSameId() throws Exception {
    server = new ScriptedServer(List.of(CLOSE, answer(201, Map.of(), MESSAGE)));
    MessageInfo prepared = producer(RetryPolicy.none()).prepare(Draft.of("t", Map.of()));
    assertEquals("m-1", prepared.messageId());
    List<String> bodies = server.bodies();
    assertEquals(2, bodies.size());
    assertEquals(bodies.get(0), bodies.get(1), "the retry repeats the request, id and all");
    assertTrue(bodies.get(0).contains("\"message_id\":\""), bodies.get(0));
  }

  @Test
  void onlyOnceWithoutARetryPolicy() throws Exception {
    server = new ScriptedServer(List.of(CLOSE, CLOSE, answer(201, Map.of(), MESSAGE)));
    RmsUnavailableException failed = assertThrows(RmsUnavailableException.class,
        () -> producer(RetryPolicy.none()).confirm("m-1"));
    assertTrue(failed.status().isEmpty());
    assertEquals(2, server.bodies().size());
  }

  @Test
  void a503IsRetriedAfterWhatRetryAfterAsks() throws Exception {
    server = new ScriptedServer(List.of(answer(503, Map.of("Retry-After", "1"),
        "{\"type\":\"x/unavailable\",\"status\":503,\"detail\":\"busy\"}"),
        answer(200, Map.of(), MESSAGE)));
    long start = System.nanoTime();
    producer(new RetryPolicy(3, Duration.ofMillis(1), Duration.ofSeconds(5))).confirm("m-1");
    long waitedMillis = (System.nanoTime() - start) / 1_000_000;
    assertTrue(waitedMillis >= 1000, "waited " + waitedMillis + " ms");
    assertEquals(2, server.bodies().size());
  }

  @Test
  void a408IsRetriedWithTheSameRequest() throws Exception {
    server = new ScriptedServer(List.of(answer(408, Map.of(),
        "{\"type\":\"x/request-timeout\",\"status\":408,\"detail\":\"body too slow\"}"),
        answer(201, Map.of(), MESSAGE)));
    MessageInfo prepared = producer(new RetryPolicy(2, Duration.ofMillis(1),
        Duration.ofMillis(10))).prepare(Draft.of("t", Map.of()));
    assertEquals("m-1", prepared.messageId());
    List<String> bodies = server.bodies();
    assertEquals(2, bodies.size());
    assertEquals(bodies.get(0), bodies.get(1), "the retry repeats the request, id and all");
  }

  @Test
  void a429ThroughEveryAttemptIsUnavailableWithTheProblem() throws Exception {
    String limited = answer(429, Map.of("Retry-After", "0"),
        "{\"type\":\"x/rate-limited\",\"status\":429,\"detail\":\"slow down\"}");
    server = new ScriptedServer(List.of(limited, limited, limited));
    RmsUnavailableException failed = assertThrows(RmsUnavailableException.class,
        () -> producer(new RetryPolicy(2, Duration.ofMillis(1), Duration.ofMillis(10)))
            .confirm("m-1"));
    assertEquals(429, failed.status().getAsInt());
    assertEquals("slow down", failed.detail());
    assertEquals(2, server.bodies().size());
  }

  /** A one-request-per-connection HTTP/1.1 server that follows a script. */
  private static final class ScriptedServer implements AutoCloseable {
    private final ServerSocket socket;
    private final Queue<String> script;
    private final List<String> bodies = Collections.synchronizedList(new ArrayList<>());
    private final Thread thread;

    ScriptedServer(List<String> steps) throws IOException {
      socket = new ServerSocket(0, 16, InetAddress.getLoopbackAddress());
      script = new ConcurrentLinkedQueue<>(steps);
      thread = new Thread(this::serve, "scripted-http");
      thread.setDaemon(true);
      thread.start();
    }

    int port() {
      return socket.getLocalPort();
    }

    List<String> bodies() {
      return List.copyOf(bodies);
    }

    private void serve() {
      while (!socket.isClosed()) {
        try (Socket connection = socket.accept()) {
          connection.setSoTimeout(5000);
          bodies.add(readRequest(connection.getInputStream()));
          String step = script.poll();
          if (step == null || step.equals(CLOSE)) {
            continue; // closed before any byte of an answer
          }
          OutputStream out = connection.getOutputStream();
          out.write(step.getBytes(StandardCharsets.UTF_8));
          out.flush();
        } catch (IOException closed) {
          return;
        }
      }
    }

    private static String readRequest(InputStream in) throws IOException {
      ByteArrayOutputStream head = new ByteArrayOutputStream();
      while (!head.toString(StandardCharsets.ISO_8859_1).endsWith("\r\n\r\n")) {
        int b = in.read();
        if (b < 0) {
          throw new IOException("request ended early");
        }
        head.write(b);
      }
      int length = 0;
      for (String line : head.toString(StandardCharsets.ISO_8859_1).split("\r\n")) {
        if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
          length = Integer.parseInt(line.substring(15).trim());
        }
      }
      return new String(in.readNBytes(length), StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }
}
