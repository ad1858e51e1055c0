package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The consumer's {@code rms-awaiting} rule (design section 6), without a broker or a database:
 * a record whose header names other apps only is skipped (no handler, no database, no ack); one
 * without the header, or with one that cannot be read, is handled; reading never throws.
 */
class AwaitingHeaderTest {
  private static final String SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

  private static RecordHeaders headers(byte[]... awaiting) {
    RecordHeaders headers = new RecordHeaders();
    headers.add("rms-message-id", "m-1".getBytes(StandardCharsets.UTF_8));
    headers.add("rms-created-at", "2026-11-28T00:00:00.000001Z".getBytes(StandardCharsets.UTF_8));
    for (byte[] value : awaiting) {
      headers.add("rms-awaiting", value);
    }
    return headers;
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static ConsumerRecord<byte[], byte[]> record(RecordHeaders headers, long offset) {
    return new ConsumerRecord<>("orders.paid", 0, offset, 0L, TimestampType.CREATE_TIME, 0, 0,
        null, utf8("{}"), headers, Optional.empty());
  }

  @Test
  void aReadableHeaderGivesItsAppNames() {
    assertEquals(Set.of("points"), AwaitingHeader.read(headers(utf8("points"))));
    assertEquals(Set.of("billing", "points"),
        AwaitingHeader.read(headers(utf8(" billing , points\t"))));
  }

  @Test
  void aHeaderThatCannotBeReadIsNotKnownAndTheRecordIsForEveryone() {
    List<RecordHeaders> unreadable = List.of(headers(), headers(utf8("")), headers(utf8("  ")),
        headers((byte[]) null), headers(utf8("billing,,points")), headers(utf8("billing,")),
        headers(utf8("Billing")), headers(utf8("bill ing")), headers(utf8("billing\n")),
        headers(new byte[] {(byte) 0xff, (byte) 0xfe, 'b'}),
        headers(utf8("billing"), utf8("billing")), headers(utf8("billing"), utf8("points")));
    for (RecordHeaders each : unreadable) {
      assertNull(AwaitingHeader.read(each), each.toString());
      assertTrue(RmsRecord.parse(record(each, 1)).orElseThrow().awaits("points"));
    }
  }

  @Test
  void onlyAReadableHeaderWithoutTheAppSkips() {
    RmsRecord parsed = RmsRecord.parse(record(headers(utf8("billing")), 1)).orElseThrow();
    assertEquals(Set.of("billing"), parsed.awaiting());
    assertFalse(parsed.awaits("points"));
    assertTrue(parsed.awaits("billing"));
  }

  @Test
  void readingAnyBytesNeverThrowsAndSkipsOnlyOnAClearList() {
    Random random = new Random(34);
    String[] parts = {"points", "billing", " ", ",", "", "é", "\u0000", "a".repeat(70)};
    for (int i = 0; i < 5000; i++) {
      byte[] raw;
      if (random.nextBoolean()) {
        raw = new byte[random.nextInt(40)];
        random.nextBytes(raw);
      } else {
        StringBuilder text = new StringBuilder();
        for (int n = random.nextInt(6); n > 0; n--) {
          text.append(parts[random.nextInt(parts.length)]);
        }
        raw = utf8(text.toString());
      }
      Set<String> names = AwaitingHeader.read(headers(raw));
      if (names != null) {
        assertFalse(names.isEmpty());
        names.forEach(name -> assertTrue(AwaitingHeader.validAppName(name), name));
      }
    }
  }

  /** A consumer whose database is never reached: port 1 answers nothing. */
  private static RmsConsumer consumer(MockConsumer<byte[], byte[]> kafka, List<String> handled,
      List<String> acked) {
    PGSimpleDataSource nowhere = new PGSimpleDataSource();
    nowhere.setServerNames(new String[] {"127.0.0.1"});
    nowhere.setPortNumbers(new int[] {1});
    nowhere.setConnectTimeout(2);
    Acker recording = new Acker() {
      @Override
      public Ack ack(String messageId, String createdAt) {
        acked.add(messageId);
        return new Ack(messageId, Ack.Result.ACKED, 200, null);
      }

      @Override
      public void close() {}
    };
    return new RmsConsumer(kafka, new JdbcInbox(nowhere),
        (conn, message) -> handled.add(message.messageId()), recording, "points");
  }

  @Test
  void aRecordAwaitedFromOthersOnlyIsSkippedUntouched() {
    List<String> handled = new ArrayList<>();
    List<String> acked = new ArrayList<>();
    try (MockConsumer<byte[], byte[]> kafka = new MockConsumer<>("earliest")) {
      BatchReport report = consumer(kafka, handled, acked)
          .handle(List.of(record(headers(utf8("billing, shipping")), 1)));
      assertEquals(1, report.count(Outcome.NOT_AWAITED));
      assertEquals(0, report.skipped());
      assertEquals(List.of(), report.acks());
    }
    assertEquals(List.of(), handled);
    assertEquals(List.of(), acked);
  }

  @Test
  void aRecordTheConsumerMayNotSkipReachesTheInbox() {
    List<String> acked = new ArrayList<>();
    try (MockConsumer<byte[], byte[]> kafka = new MockConsumer<>("earliest")) {
      RmsConsumer consumer = consumer(kafka, new ArrayList<>(), acked);
      for (RecordHeaders each : List.of(headers(utf8("points,billing")),
          headers(utf8("billing"), utf8("billing")), headers(new byte[] {(byte) 0xff}),
          headers())) {
        BatchReport report = consumer.handle(List.of(record(each, 1)));
        assertEquals(1, report.count(Outcome.FAILED), each.toString());
      }
    }
    assertEquals(List.of(), acked);
  }

  @Test
  void aConsumerNeedsItsAppOrTheTopicAckersApp() {
    MockProducer<byte[], byte[]> producer = new MockProducer<>(true, null,
        new ByteArraySerializer(), new ByteArraySerializer());
    JdbcInbox inbox = new JdbcInbox(new PGSimpleDataSource());
    InboxHandler nothing = (conn, message) -> { };
    try (MockConsumer<byte[], byte[]> kafka = new MockConsumer<>("earliest");
        TopicAcker signing = new TopicAcker(producer, "points", List.of(SECRET), "rms.acks",
            Duration.ofSeconds(1));
        HttpAcker http = new HttpAcker(java.net.URI.create("http://127.0.0.1:1"), "key")) {
      assertEquals("points", new RmsConsumer(kafka, inbox, nothing, signing).app());
      assertEquals("points", new RmsConsumer(kafka, inbox, nothing, signing, "points").app());
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> new RmsConsumer(kafka, inbox, nothing, http)).getMessage()
          .contains("needs the app"));
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> new RmsConsumer(kafka, inbox, nothing, http, "Points")).getMessage()
          .contains("not an RMS app name"));
      assertTrue(assertThrows(IllegalArgumentException.class,
          () -> new RmsConsumer(kafka, inbox, nothing, signing, "billing")).getMessage()
          .contains("differs from 'points'"));
    }
  }
}
