package dev.rms.client.producer;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rms.client.internal.Json;
import java.time.OffsetDateTime;
import java.util.Optional;

/**
 * A message as RMS reports it. The common fields are typed; {@link #raw()} holds every field of
 * the API's message object ({@code confirmed_at}, {@code next_delivery_at}, ...).
 */
public record MessageInfo(
    String messageId,
    String app,
    String topic,
    String key,
    String state,
    boolean dead,
    String deadReason,
    int checkCount,
    int deliveryCount,
    OffsetDateTime createdAt,
    JsonNode payload,
    JsonNode raw) {

  /** The message object of the API. */
  public static MessageInfo fromJson(JsonNode data) {
    return new MessageInfo(
        data.path("message_id").asText(),
        Json.text(data, "app"),
        data.path("topic").asText(),
        Json.text(data, "key"),
        data.path("state").asText(),
        data.path("dead").asBoolean(false),
        Json.text(data, "dead_reason"),
        data.path("check_count").asInt(0),
        data.path("delivery_count").asInt(0),
        OffsetDateTime.parse(data.path("created_at").asText()),
        data.path("payload"),
        data);
  }

  /** The W3C trace context RMS stored with the message. */
  public Optional<String> traceparent() {
    return Optional.ofNullable(Json.text(raw, "traceparent"));
  }

  /** When a delayed message is published at the earliest. */
  public Optional<OffsetDateTime> deliverAfter() {
    return Optional.ofNullable(Json.text(raw, "deliver_after")).map(OffsetDateTime::parse);
  }
}
