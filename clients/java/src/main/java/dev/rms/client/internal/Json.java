package dev.rms.client.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Optional;

/** The one JSON mapper of the client: unknown fields are ignored (the contract may add some). */
public final class Json {
  public static final ObjectMapper MAPPER =
      JsonMapper.builder().disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES).build();

  private Json() {}

  public static byte[] bytes(Object value) {
    try {
      return MAPPER.writeValueAsBytes(value);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("not serialisable as JSON: " + e.getOriginalMessage(), e);
    }
  }

  /** The JSON tree of {@code body}, or empty when it is not JSON. */
  public static Optional<JsonNode> tree(byte[] body) {
    if (body == null || body.length == 0) {
      return Optional.empty();
    }
    try {
      return Optional.ofNullable(MAPPER.readTree(body));
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  public static <T> T convert(JsonNode node, Class<T> type) {
    try {
      return MAPPER.treeToValue(node, type);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The text of {@code field}, or null when absent or JSON null. */
  public static String text(JsonNode node, String field) {
    JsonNode value = node.get(field);
    return value == null || value.isNull() ? null : value.asText();
  }
}
