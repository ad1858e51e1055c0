package dev.rms.client.checkback;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import dev.rms.client.LiveRms;
import dev.rms.client.barrier.BarrierClosedException;
import dev.rms.client.barrier.JdbcBarrier;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import dev.rms.client.producer.TransactionDraft;
import dev.rms.client.producer.TransactionInfo;
import dev.rms.client.signing.Signatures;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import javax.sql.DataSource;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * RMS's confirm worker calls a real check-back server of each adapter on 127.0.0.1, which
 * answers through the JDBC barrier; and the documented refusals over real HTTP.
 */
class CheckBackLiveTest {
  private static final Duration RESOLVED_WITHIN = Duration.ofSeconds(30);
  private static LiveRms rms;
  private static DataSource db;
  private static JdbcBarrier barrier;
  private HttpServer jdkServer;
  private Server jetty;

  @BeforeAll
  static void database() throws SQLException {
    rms = LiveRms.get();
    db = LiveRms.dataSource();
    barrier = new JdbcBarrier(db, "checkback_barrier", Duration.ofSeconds(5));
    barrier.createTable();
  }

  @AfterEach
  void stopServers() throws Exception {
    if (jdkServer != null) {
      jdkServer.stop(0);
    }
    if (jetty != null) {
      jetty.stop();
    }
  }

  /** A producer app and its check-back URL, served by the JDK HttpServer adapter. */
  private record Setup(RmsProducer producer, String topic, String checkUrl, String secret) {}

  private Setup onJdkServer() throws Exception {
    jdkServer = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    String base = "http://127.0.0.1:" + jdkServer.getAddress().getPort() + "/";
    Setup setup = setup(base, "/rms/check");
    jdkServer.createContext("/rms/check", new CheckBackHttpHandler(handler(setup.secret())));
    jdkServer.start();
    return setup;
  }

  private Setup onServletFilter() throws Exception {
    jetty = new Server(new InetSocketAddress("127.0.0.1", 0));
    ServletContextHandler context = new ServletContextHandler();
    context.setContextPath("/");
    jetty.setHandler(context);
    context.addServlet(new ServletHolder(new HttpServlet() {
      private static final long serialVersionUID = 1L;

      @Override
      protected void doPost(HttpServletRequest request, HttpServletResponse response) {
        response.setStatus(418); // the application's own route: the filter passes it on
      }
    }), "/*");
    jetty.start();
    int port = ((ServerConnector) jetty.getConnectors()[0]).getLocalPort();
    Setup setup = setup("http://127.0.0.1:" + port + "/", "/hooks/rms");
    context.addFilter(new FilterHolder(new CheckBackFilter(handler(setup.secret()),
        "/hooks/rms")), "/*", EnumSet.of(DispatcherType.REQUEST));
    return setup;
  }

  private static Setup setup(String base, String path) {
    String topic = rms.topic("checked");
    LiveRms.App app = rms.createApp("checked", List.of(topic), List.of(), base);
    RmsProducer producer = RmsProducer.builder(rms.url, app.apiKey()).build();
    return new Setup(producer, topic, base + path.substring(1), app.signingSecret());
  }

  private static CheckBackHandler handler(String secret) {
    return CheckBackHandler.builder(List.of(secret), barrier::resolve)
        .transactionResolver(barrier::resolveTransaction).build();
  }

  private static void commitLocally(String barrierId) throws SQLException {
    try (Connection conn = db.getConnection()) {
      conn.setAutoCommit(false);
      barrier.markCommitted(conn, barrierId);
      conn.commit();
    }
  }

  private static Draft draft(Setup setup) {
    return Draft.builder(setup.topic(), Map.of("order", 7)).checkUrl(setup.checkUrl())
        .checkAfter(Duration.ofSeconds(1)).build();
  }

  private static void awaitState(String what, Function<String, String> state, String id,
      String expected) throws InterruptedException {
    LiveRms.await(what + " " + id + " to become " + expected, RESOLVED_WITHIN,
        () -> expected.equals(state.apply(id)));
  }

  @Test
  void aCrashAfterTheLocalCommitIsConfirmedByTheCheckBackThroughTheBarrier() throws Exception {
    Setup setup = onJdkServer();
    MessageInfo committed = setup.producer().prepare(draft(setup));
    commitLocally(committed.messageId());
    // the producer "crashes" here: no confirm
    MessageInfo abandoned = setup.producer().prepare(draft(setup)); // died before its commit

    awaitState("message", id -> setup.producer().get(id).state(), committed.messageId(), "sent");
    awaitState("message", id -> setup.producer().get(id).state(), abandoned.messageId(),
        "deleted");
    assertTrue(setup.producer().get(committed.messageId()).checkCount() >= 1);
    // the late local transaction of the rolled-back message can no longer commit
    try (Connection conn = db.getConnection()) {
      conn.setAutoCommit(false);
      assertThrows(BarrierClosedException.class,
          () -> barrier.markCommitted(conn, abandoned.messageId()));
      conn.rollback();
    }
  }

  @Test
  void aTransactionIsAskedOnceAndConfirmedThroughTheBarrier() throws Exception {
    Setup setup = onJdkServer();
    TransactionInfo tx = setup.producer().prepareTransaction(TransactionDraft.builder()
        .checkUrl(setup.checkUrl()).checkAfter(Duration.ofSeconds(1))
        .message(Draft.of(setup.topic(), Map.of("n", 1)))
        .message(Draft.of(setup.topic(), Map.of("n", 2)))
        .message(Draft.of(setup.topic(), Map.of("n", 3))).build());
    commitLocally(tx.transactionId());

    awaitState("transaction", id -> setup.producer().getTransaction(id).state(),
        tx.transactionId(), "confirmed");
    setup.producer().getTransaction(tx.transactionId()).messages()
        .forEach(m -> assertEquals("sent", m.state()));
  }

  @Test
  void theServletFilterAnswersTheCheckBackAndPassesOtherRequestsOn() throws Exception {
    Setup setup = onServletFilter();
    MessageInfo committed = setup.producer().prepare(draft(setup));
    commitLocally(committed.messageId());

    awaitState("message", id -> setup.producer().get(id).state(), committed.messageId(), "sent");
    HttpResponse<String> other = post(URI.create(setup.checkUrl().replace("/hooks/rms",
        "/orders")), Map.of(), "{}");
    assertEquals(418, other.statusCode());
  }

  @Test
  void forgedStaleAndReplayedCallsAreRefusedOverHttp() throws Exception {
    Setup setup = onJdkServer();
    URI url = URI.create(setup.checkUrl());
    String body = "{\"message_id\":\"m-1\",\"app\":\"a\",\"topic\":\"t\",\"key\":null,"
        + "\"headers\":{},\"created_at\":\"2026-01-01T00:00:00Z\",\"check_count\":1}";
    long now = Instant.now().getEpochSecond();

    String forgedSecret = "whsec_" + java.util.Base64.getEncoder()
        .encodeToString("not the app's secret".getBytes(StandardCharsets.UTF_8));
    HttpResponse<String> forged = post(url, signed(forgedSecret, "msg_m-1_1", now, body), body);
    assertEquals(401, forged.statusCode());
    assertTrue(forged.body().contains("no webhook-signature matches"), forged.body());
    assertEquals("application/problem+json",
        forged.headers().firstValue("content-type").orElseThrow());

    HttpResponse<String> stale = post(url, signed(setup.secret(), "msg_m-1_2", now - 600, body),
        body);
    assertEquals(401, stale.statusCode());
    assertTrue(stale.body().contains("tolerance"), stale.body());

    Map<String, String> good = signed(setup.secret(), "msg_m-1_3", now, body);
    HttpResponse<String> first = post(url, good, body);
    assertEquals(200, first.statusCode());
    assertEquals("{\"status\":\"rolled_back\"}", first.body()); // nothing committed m-1
    HttpResponse<String> replay = post(url, good, body);
    assertEquals(409, replay.statusCode());

    String notACheck = "{\"hello\":1}";
    HttpResponse<String> invalid = post(url, signed(setup.secret(), "msg_x_1", now, notACheck),
        notACheck);
    assertEquals(422, invalid.statusCode());
  }

  private static Map<String, String> signed(String secret, String id, long timestamp,
      String body) {
    return Signatures.signedHeaders(List.of(secret), id, timestamp,
        body.getBytes(StandardCharsets.UTF_8));
  }

  private static HttpResponse<String> post(URI url, Map<String, String> headers, String body)
      throws Exception {
    HttpRequest.Builder request = HttpRequest.newBuilder(url)
        .POST(HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(request::header);
    return HttpClient.newHttpClient().send(request.build(), HttpResponse.BodyHandlers.ofString());
  }
}
