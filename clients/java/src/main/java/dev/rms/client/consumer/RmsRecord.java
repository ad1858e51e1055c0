package dev.rms.client.consumer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.TextNode;
import dev.rms.client.internal.Json;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * A Kafka record RMS published, with its {@code rms-*} headers read (design section 6): the
 * message id, the app that produced it, which delivery this is (1 for the first publish, 2 for
 * the first redelivery, ...), the JSON payload, and the apps that still owed an ack when it was
 * published ({@code awaiting}, the {@code rms-awaiting} header; null when the record has none
 * or it cannot be read, see {@link AwaitingHeader}).
 */
public record RmsRecord(
    String messageId,
    int delivery,
    String app,
    String createdAt,
    String topic,
    int partition,
    long offset,
    byte[] key,
    JsonNode payload,
    Map<String, String> headers,
    Set<String> awaiting) {
  public static final String HEADER_MESSAGE_ID = "rms-message-id";
  public static final String HEADER_APP = "rms-app";
  public static final String HEADER_DELIVERY = "rms-delivery";
  public static final String HEADER_CREATED_AT = "rms-created-at";

  /** A record without an {@code rms-awaiting} header (the single-ack rule). */
  public RmsRecord(String messageId, int delivery, String app, String createdAt, String topic,
      int partition, long offset, byte[] key, JsonNode payload, Map<String, String> headers) {
    this(messageId, delivery, app, createdAt, topic, partition, offset, key, payload, headers,
        null);
  }

  /**
   * Whether the record is for {@code app}: false only when its {@code rms-awaiting} header was
   * read and does not name it ({@code app} acknowledged the message already).
   */
  public boolean awaits(String app) {
    return AwaitingHeader.awaits(awaiting, app);
  }

  /** RMS's message-id pattern; ids a path would rewrite are reserved. */
  private static final Pattern MESSAGE_ID = Pattern.compile("[A-Za-z0-9._:-]{1,128}");
  private static final Set<String> RESERVED_IDS = Set.of("batch", "send", ".", "..");

  /**
   * The record read as an RMS record; empty when it cannot be one (no valid {@code
   * rms-message-id}) or cannot be read. Never throws, whatever the record holds: the consumer
   * sets such a record aside and goes on.
   */
  public static Optional<RmsRecord> parse(ConsumerRecord<byte[], byte[]> record) {
    try {
      return read(record);
    } catch (RuntimeException unreadable) { // whatever the record holds: set aside
      return Optional.empty();
    }
  }

  private static Optional<RmsRecord> read(ConsumerRecord<byte[], byte[]> record) {
    Map<String, String> headers = new LinkedHashMap<>();
    for (Header header : record.headers()) {
      byte[] value = header.value();
      headers.put(header.key(), value == null ? "" : new String(value, StandardCharsets.UTF_8));
    }
    String messageId = headers.get(HEADER_MESSAGE_ID);
    if (messageId == null || !MESSAGE_ID.matcher(messageId).matches()
        || RESERVED_IDS.contains(messageId)) {
      return Optional.empty();
    }
    return Optional.of(new RmsRecord(messageId, delivery(headers.get(HEADER_DELIVERY)),
        headers.get(HEADER_APP), headers.get(HEADER_CREATED_AT), record.topic(),
        record.partition(), record.offset(), record.key(), payload(record.value()),
        Map.copyOf(headers), AwaitingHeader.read(record.headers())));
  }

  /** The record's W3C {@code traceparent}, when RMS stored a trace context with the message. */
  public Optional<String> traceparent() {
    return Optional.ofNullable(headers.get("traceparent"));
  }

  private static int delivery(String value) {
    if (value == null || value.isEmpty() || value.length() > 9
        || !value.chars().allMatch(c -> c >= '0' && c <= '9')) {
      return 0;
    }
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException tooLarge) {
      return 0;
    }
  }

  /** The JSON payload; a value that is not JSON is kept as text. */
  private static JsonNode payload(byte[] value) {
    if (value == null) {
      return null;
    }
    return Json.tree(value).orElseGet(() -> TextNode.valueOf(new String(value,
        StandardCharsets.UTF_8)));
  }
}
