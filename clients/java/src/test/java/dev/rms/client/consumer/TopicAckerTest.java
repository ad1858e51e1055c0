package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.signing.SignatureException;
import dev.rms.client.signing.Verifier;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.context.Scope;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/** The ack record's shape and signature (design section 6); the live test sends real ones. */
class TopicAckerTest {
  private static final String SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

  private static TopicAcker acker() {
    MockProducer<byte[], byte[]> unused = new MockProducer<>(true, null,
        new ByteArraySerializer(), new ByteArraySerializer());
    return new TopicAcker(unused, "points", List.of(SECRET), "rms.acks", Duration.ofSeconds(1));
  }

  private static Map<String, List<String>> headers(ProducerRecord<byte[], byte[]> record) {
    Map<String, List<String>> headers = new LinkedHashMap<>();
    for (Header header : record.headers()) {
      headers.computeIfAbsent(header.key(), k -> new ArrayList<>())
          .add(new String(header.value(), StandardCharsets.UTF_8));
    }
    return headers;
  }

  private static final String CREATED_AT = "2026-11-26T08:00:00.123456Z";

  @Test
  void theValueNamesTheMessageItsInstanceAndTheConsumerAndIsSignedWithTheConsumersSecret()
      throws SignatureException {
    ProducerRecord<byte[], byte[]> record = acker().record("m-1", CREATED_AT);
    assertEquals("rms.acks", record.topic());
    assertEquals("m-1", new String(record.key(), StandardCharsets.UTF_8));
    assertEquals("{\"message_id\":\"m-1\",\"consumer\":\"points\",\"created_at\":\""
        + CREATED_AT + "\"}", new String(record.value(), StandardCharsets.UTF_8));
    Verifier.Verified verified = new Verifier(List.of(SECRET)).verify(headers(record),
        record.value());
    assertTrue(verified.webhookId().startsWith("ack_"));
    ProducerRecord<byte[], byte[]> another = acker().record("m-1", CREATED_AT);
    assertNotEquals(verified.webhookId(), new Verifier(List.of(SECRET))
        .verify(headers(another), another.value()).webhookId(), "a new webhook-id per ack");
  }

  @Test
  void anAckWithoutCreatedAtIsRefusedAndNothingIsWritten() {
    assertThrows(IllegalArgumentException.class, () -> acker().value("m-1", null));
    assertEquals(Ack.Result.REFUSED, acker().ack("m-1", null).result());
    assertEquals(Ack.Result.REFUSED, acker().ack("m-1", "").result());
  }

  @Test
  void anAckOfARecordNamesItsRmsCreatedAt() {
    List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
    MockProducer<byte[], byte[]> producer = new MockProducer<>(true, null,
        new ByteArraySerializer(), new ByteArraySerializer());
    RmsRecord record = new RmsRecord("m-1", 1, "shop", CREATED_AT, "orders", 0, 0L, null, null,
        Map.of());
    try (TopicAcker acker = new TopicAcker(producer, "points", List.of(SECRET), "rms.acks",
        Duration.ofSeconds(1))) {
      assertEquals(Ack.Result.ACKED, acker.ack(record).result());
    }
    sent.addAll(producer.history());
    assertEquals(1, sent.size());
    assertEquals("{\"message_id\":\"m-1\",\"consumer\":\"points\",\"created_at\":\""
        + CREATED_AT + "\"}", new String(sent.get(0).value(), StandardCharsets.UTF_8));
  }

  @Test
  void theCurrentTraceContextTravelsUnsigned() {
    SpanContext span = SpanContext.create("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
        TraceFlags.getSampled(), TraceState.getDefault());
    ProducerRecord<byte[], byte[]> record;
    try (Scope ignored = Span.wrap(span).makeCurrent()) {
      record = acker().record("m-1", CREATED_AT);
    }
    assertEquals(List.of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        headers(record).get("traceparent"));
  }

  @Test
  void aMalformedSecretFailsAtConstruction() {
    MockProducer<byte[], byte[]> unused = new MockProducer<>(true, null,
        new ByteArraySerializer(), new ByteArraySerializer());
    assertThrows(IllegalArgumentException.class, () -> new TopicAcker(unused, "points",
        List.of("whsec_!!"), "rms.acks", Duration.ofSeconds(1)));
  }
}
