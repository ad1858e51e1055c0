package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

/** Reading the rms-* headers of a record (design section 6). */
class RmsRecordTest {
  private static ConsumerRecord<byte[], byte[]> record(RecordHeaders headers, String value) {
    return new ConsumerRecord<>("orders.paid", 3, 17L, 0L, TimestampType.CREATE_TIME, 0, 0,
        "k".getBytes(StandardCharsets.UTF_8),
        value == null ? null : value.getBytes(StandardCharsets.UTF_8), headers, Optional.empty());
  }

  private static RecordHeaders headers(String... pairs) {
    RecordHeaders headers = new RecordHeaders();
    for (int i = 0; i < pairs.length; i += 2) {
      headers.add(pairs[i], pairs[i + 1].getBytes(StandardCharsets.UTF_8));
    }
    return headers;
  }

  @Test
  void readsTheRmsHeadersAndThePayload() {
    RmsRecord parsed = RmsRecord.parse(record(headers("rms-message-id", "m-1", "rms-app",
        "orders", "rms-delivery", "2", "rms-created-at", "2026-11-26T09:00:00+00:00",
        "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "custom", "x"), "{\"order\":42}")).orElseThrow();
    assertEquals("m-1", parsed.messageId());
    assertEquals("orders", parsed.app());
    assertEquals(2, parsed.delivery());
    assertEquals("2026-11-26T09:00:00+00:00", parsed.createdAt());
    assertEquals("orders.paid", parsed.topic());
    assertEquals(3, parsed.partition());
    assertEquals(17L, parsed.offset());
    assertArrayEquals("k".getBytes(StandardCharsets.UTF_8), parsed.key());
    assertEquals(42, parsed.payload().get("order").asInt());
    assertEquals("x", parsed.headers().get("custom"));
    assertTrue(parsed.traceparent().orElseThrow().startsWith("00-4bf92f35"));
  }

  @Test
  void aRecordWithoutAMessageIdIsNotAnRmsRecord() {
    assertTrue(RmsRecord.parse(record(headers("rms-app", "orders"), "{}")).isEmpty());
    assertTrue(RmsRecord.parse(record(headers("rms-message-id", ""), "{}")).isEmpty());
  }

  @Test
  void aMalformedDeliveryIsZeroAndANonJsonValueIsKeptAsText() {
    RmsRecord parsed = RmsRecord.parse(record(headers("rms-message-id", "m", "rms-delivery",
        "two"), "not json")).orElseThrow();
    assertEquals(0, parsed.delivery());
    assertEquals("not json", parsed.payload().asText());
  }

  /** Hostile records are set aside (empty), never an exception; odd other headers still read. */
  @Test
  void hostileRecordsAreSetAsideNeverThrown() {
    for (String id : List.of("", "a/b\n", "m".repeat(5000), "..", "batch", "m\0", "m 1")) {
      assertTrue(RmsRecord.parse(record(headers("rms-message-id", id), "{")).isEmpty(), id);
    }
    RecordHeaders nullValue = new RecordHeaders();
    nullValue.add("rms-message-id", null);
    assertTrue(RmsRecord.parse(record(nullValue, null)).isEmpty());
    RecordHeaders binary = new RecordHeaders();
    binary.add("rms-message-id", new byte[] {(byte) 0xff, (byte) 0xfe});
    assertTrue(RmsRecord.parse(record(binary, "{}")).isEmpty());
    for (String delivery : List.of("9".repeat(5000), "\u0662", "-1", "1e9", "+5")) {
      RmsRecord parsed = RmsRecord.parse(record(headers("rms-message-id", "m-1", "rms-delivery",
          delivery, "traceparent", "00-" + "f".repeat(300)),
          "{\"n\": 1" + "0".repeat(400) + "}")).orElseThrow();
      assertEquals(0, parsed.delivery(), delivery);
    }
    assertTrue(RmsRecord.parse(record(headers("rms-message-id", "m-1"), "[".repeat(5000)))
        .isPresent());
  }
}
