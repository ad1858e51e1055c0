package dev.rms.client.producer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.LiveRms;
import dev.rms.client.RmsConflictException;
import dev.rms.client.RmsNotFoundException;
import dev.rms.client.RmsValidationException;
import dev.rms.client.barrier.JdbcBarrier;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The producer against the live RMS. */
class ProducerLiveTest {
  private static final String CHECK_URL = "http://127.0.0.1:9/rms/check"; // never called here
  private static LiveRms rms;
  private static RmsProducer producer;
  private static String orders;
  private static String invoices;
  private static DataSource db;
  private static JdbcBarrier barrier;

  @BeforeAll
  static void app() throws Exception {
    rms = LiveRms.get();
    orders = rms.topic("orders");
    invoices = rms.topic("invoices");
    LiveRms.App app = rms.createApp("producer", List.of(orders, invoices), List.of(),
        "http://127.0.0.1:9/");
    producer = RmsProducer.builder(rms.url, app.apiKey()).defaultCheckUrl(CHECK_URL).build();
    db = LiveRms.dataSource();
    barrier = new JdbcBarrier(db, "producer_barrier", Duration.ofSeconds(5));
    barrier.createTable();
    try (Connection conn = db.getConnection(); Statement st = conn.createStatement()) {
      st.execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, paid boolean)");
    }
  }

  @Test
  void prepareThenLocalCommitThenConfirm() throws Exception {
    Draft draft = Draft.builder(orders, Map.of("order", 42)).key("order-42").build();
    String orderId = "o-" + System.nanoTime();
    MessageInfo prepared = producer.prepare(draft);
    assertEquals("pending-send", prepared.state());
    try (Connection conn = db.getConnection()) {
      conn.setAutoCommit(false);
      barrier.markCommitted(conn, prepared.messageId());
      try (var st = conn.prepareStatement("INSERT INTO orders VALUES (?, true)")) {
        st.setString(1, orderId);
        st.executeUpdate();
      }
      conn.commit();
    }
    MessageInfo confirmed = producer.confirm(prepared.messageId());
    assertEquals("sent", confirmed.state());
    assertEquals("order-42", confirmed.key());
    assertEquals(42, confirmed.payload().get("order").asInt());
    assertEquals("sent", producer.confirm(prepared.messageId()).state(), "confirm is idempotent");
  }

  @Test
  void transactionalHelperConfirmsAfterTheWorkAndCancelsWhenItThrows() {
    String done = producer.transactional(Draft.of(orders, Map.of("order", 1)),
        message -> message.messageId());
    assertEquals("sent", producer.get(done).state());
    String[] seen = new String[1];
    IllegalStateException failure = assertThrows(IllegalStateException.class, () ->
        producer.transactional(Draft.of(orders, Map.of("order", 2)), message -> {
          seen[0] = message.messageId();
          throw new IllegalStateException("local transaction failed");
        }));
    assertEquals("local transaction failed", failure.getMessage());
    assertEquals("deleted", producer.get(seen[0]).state());
  }

  @Test
  void aTransactionOfThreeMessagesIsConfirmedAsOneInItsOrder() {
    TransactionDraft draft = TransactionDraft.builder()
        .message(Draft.builder(orders, Map.of("step", 1)).messageId("tx3-a-" + System.nanoTime())
            .build())
        .message(Draft.of(invoices, Map.of("step", 2)))
        .message(Draft.builder(orders, Map.of("step", 3)).key("k").build())
        .build();
    TransactionInfo confirmed = producer.transactional(draft, prepared -> {
      assertEquals("pending", prepared.state());
      assertEquals(3, prepared.messages().size());
      prepared.messages().forEach(m -> assertEquals("pending-send", m.state()));
      return producer.getTransaction(prepared.transactionId());
    });
    TransactionInfo after = producer.getTransaction(confirmed.transactionId());
    assertEquals("confirmed", after.state());
    assertEquals(confirmed.messageIds(), after.messageIds());
    assertEquals(List.of(orders, invoices, orders),
        after.messages().stream().map(MessageInfo::topic).toList());
    after.messages().forEach(m -> assertEquals("sent", m.state()));
    assertEquals(List.of(1, 2, 3), after.messages().stream()
        .map(m -> m.payload().get("step").asInt()).toList());
  }

  @Test
  void batchesSendAndDelayedDelivery() {
    List<MessageInfo> batch = producer.prepareBatch(List.of(Draft.of(orders, Map.of("n", 1)),
        Draft.of(orders, Map.of("n", 2))));
    List<String> ids = batch.stream().map(MessageInfo::messageId).toList();
    producer.confirmBatch(ids).forEach(m -> assertEquals("sent", m.state()));

    MessageInfo sent = producer.send(Draft.of(orders, Map.of("one-shot", true)));
    assertEquals("sent", sent.state());

    MessageInfo delayed = producer.send(Draft.builder(orders, Map.of("later", true))
        .delay(Duration.ofMinutes(10)).build());
    assertEquals("sent", delayed.state());
    assertEquals(0, delayed.deliveryCount(), "nothing is published before the delay");
    assertTrue(delayed.deliverAfter().isPresent());
  }

  @Test
  void theCurrentSpanIsPassedOnAsTraceparent() {
    String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    SpanContext parent = SpanContext.create(traceId, "00f067aa0ba902b7", TraceFlags.getSampled(),
        TraceState.getDefault());
    MessageInfo prepared;
    try (Scope ignored = Span.wrap(parent).makeCurrent()) {
      prepared = producer.prepare(Draft.of(orders, Map.of("traced", true)));
    }
    String traceparent = prepared.traceparent().orElseThrow();
    assertEquals(traceId, traceparent.split("-")[1], traceparent);
    MessageInfo untraced = producer.prepare(Draft.of(orders, Map.of("traced", false)));
    assertFalse(untraced.traceparent().isPresent() && untraced.traceparent().get()
        .contains(traceId));
  }

  @Test
  void aRetriedPrepareWithTheSameIdIsAnsweredWithTheStoredMessage() {
    Draft draft = Draft.builder(orders, Map.of("same", 1)).messageId("same-" + System.nanoTime())
        .build();
    MessageInfo first = producer.prepare(draft);
    MessageInfo again = producer.prepare(draft);
    assertEquals(first.messageId(), again.messageId());
    assertEquals(first.createdAt(), again.createdAt());
    RmsConflictException other = assertThrows(RmsConflictException.class, () ->
        producer.prepare(Draft.builder(orders, Map.of("same", 2)).messageId(first.messageId())
            .build()));
    assertEquals(409, other.status().getAsInt());
  }

  @Test
  void a409NamesTheCurrentState() {
    MessageInfo sent = producer.send(Draft.of(orders, Map.of("x", 1)));
    RmsConflictException conflict = assertThrows(RmsConflictException.class,
        () -> producer.cancel(sent.messageId()));
    assertEquals("sent", conflict.currentState().orElseThrow());
    assertFalse(conflict.isPartOfTransaction());
  }

  @Test
  void a409ForAMessageOfATransactionNamesTheTransaction() {
    TransactionInfo pending = producer.prepareTransaction(TransactionDraft.of(List.of(
        Draft.of(orders, Map.of("a", 1)), Draft.of(orders, Map.of("b", 2)))));
    String member = pending.messageIds().get(1);
    RmsConflictException conflict = assertThrows(RmsConflictException.class,
        () -> producer.confirm(member));
    assertTrue(conflict.isPartOfTransaction(), conflict.type());
    assertEquals(pending.transactionId(), conflict.transactionId().orElseThrow());
    assertEquals("pending-send", conflict.currentState().orElseThrow());
    assertEquals("cancelled", producer.cancelTransaction(pending.transactionId()).state());
  }

  @Test
  void a422CarriesTheProblemDocument() {
    RmsValidationException invalid = assertThrows(RmsValidationException.class, () ->
        producer.prepare(Draft.builder(orders, Map.of("x", 1)).messageId("not valid!").build()));
    assertEquals(422, invalid.problem().get("status").asInt());
    assertTrue(invalid.type().endsWith("validation"), invalid.type());
    assertTrue(invalid.detail().contains("message_id"), invalid.detail());
    assertFalse(invalid.errors().isEmpty());
  }

  @Test
  void a404IsTyped() {
    assertThrows(RmsNotFoundException.class, () -> producer.get("no-such-" + System.nanoTime()));
    assertThrows(RmsNotFoundException.class,
        () -> producer.confirmTransaction("no-such-" + System.nanoTime()));
  }
}
