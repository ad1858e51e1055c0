package dev.rms.client.producer;

import dev.rms.client.internal.Ids;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A message to prepare or send: its topic and JSON payload (any value Jackson serialises) and
 * the optional fields of the contract. Without a {@code messageId} the producer picks a new
 * time-ordered id before the first attempt, so a retry repeats the same id.
 */
public final class Draft {
  private final String topic;
  private final Object payload;
  private final String messageId;
  private final String key;
  private final Map<String, String> headers;
  private final String checkUrl;
  private final Duration checkAfter;
  private final Integer maxChecks;
  private final Duration ackTimeout;
  private final Integer maxDeliveries;
  private final OffsetDateTime deliverAfter;
  private final Duration delay;

  private Draft(Builder b) {
    this.topic = Objects.requireNonNull(b.topic, "topic");
    this.payload = b.payload;
    this.messageId = b.messageId;
    this.key = b.key;
    this.headers = Map.copyOf(b.headers);
    this.checkUrl = b.checkUrl;
    this.checkAfter = b.checkAfter;
    this.maxChecks = b.maxChecks;
    this.ackTimeout = b.ackTimeout;
    this.maxDeliveries = b.maxDeliveries;
    this.deliverAfter = b.deliverAfter;
    this.delay = b.delay;
    if (deliverAfter != null && delay != null) {
      throw new IllegalArgumentException("give deliverAfter or delay, not both");
    }
  }

  public static Builder builder(String topic, Object payload) {
    return new Builder(topic, payload);
  }

  /** A draft with only a topic and a payload. */
  public static Draft of(String topic, Object payload) {
    return builder(topic, payload).build();
  }

  public String topic() {
    return topic;
  }

  public String messageId() {
    return messageId;
  }

  /** The prepare (or send) body, with {@code defaultCheckUrl} when the draft has none. */
  Map<String, Object> body(String id, String defaultCheckUrl) {
    Map<String, Object> body = common(id);
    putCheckBack(body, checkUrl, checkAfter, maxChecks, defaultCheckUrl);
    put(body, "deliver_after", deliverAfter == null ? null : deliverAfter.toString());
    put(body, "delay_seconds", seconds(delay));
    return body;
  }

  /** The body as a message of a transaction, which carries the check-back fields itself. */
  Map<String, Object> memberBody(String id) {
    List<String> own = new java.util.ArrayList<>();
    if (checkUrl != null) {
      own.add("checkUrl");
    }
    if (checkAfter != null) {
      own.add("checkAfter");
    }
    if (maxChecks != null) {
      own.add("maxChecks");
    }
    if (deliverAfter != null || delay != null) {
      own.add("deliverAfter or delay");
    }
    if (!own.isEmpty()) {
      throw new IllegalArgumentException("a message of a transaction takes no " + String.join(
          ", ", own) + ": the check-back fields are the transaction's, and its messages are "
          + "delivered when it is confirmed");
    }
    return common(id);
  }

  /** The id this draft is sent with: its own, or a new one. */
  String idOrNew() {
    return messageId != null ? messageId : Ids.newId();
  }

  private Map<String, Object> common(String id) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("message_id", id);
    body.put("topic", topic);
    body.put("payload", payload);
    put(body, "key", key);
    put(body, "headers", headers.isEmpty() ? null : headers);
    put(body, "ack_timeout_seconds", seconds(ackTimeout));
    put(body, "max_deliveries", maxDeliveries);
    return body;
  }

  /**
   * The check-back fields of a message or a transaction, with {@code defaultCheckUrl} when it
   * names no check URL.
   */
  static void putCheckBack(Map<String, Object> body, String checkUrl, Duration checkAfter,
      Integer maxChecks, String defaultCheckUrl) {
    put(body, "check_url", checkUrl != null ? checkUrl : defaultCheckUrl);
    put(body, "check_after_seconds", seconds(checkAfter));
    put(body, "max_checks", maxChecks);
  }

  static Double seconds(Duration duration) {
    return duration == null ? null : duration.toMillis() / 1000.0;
  }

  static void put(Map<String, Object> body, String field, Object value) {
    if (value != null) {
      body.put(field, value);
    }
  }

  /** Builds a {@link Draft}; every setting is optional. */
  public static final class Builder {
    private final String topic;
    private final Object payload;
    private String messageId;
    private String key;
    private final Map<String, String> headers = new LinkedHashMap<>();
    private String checkUrl;
    private Duration checkAfter;
    private Integer maxChecks;
    private Duration ackTimeout;
    private Integer maxDeliveries;
    private OffsetDateTime deliverAfter;
    private Duration delay;

    private Builder(String topic, Object payload) {
      this.topic = topic;
      this.payload = payload;
    }

    public Builder messageId(String messageId) {
      this.messageId = messageId;
      return this;
    }

    /** The partition key (the Kafka record key; RMS uses the message id without one). */
    public Builder key(String key) {
      this.key = key;
      return this;
    }

    public Builder header(String name, String value) {
      headers.put(name, value);
      return this;
    }

    public Builder headers(Map<String, String> values) {
      headers.putAll(values);
      return this;
    }

    public Builder checkUrl(String checkUrl) {
      this.checkUrl = checkUrl;
      return this;
    }

    public Builder checkAfter(Duration checkAfter) {
      this.checkAfter = checkAfter;
      return this;
    }

    public Builder maxChecks(int maxChecks) {
      this.maxChecks = maxChecks;
      return this;
    }

    public Builder ackTimeout(Duration ackTimeout) {
      this.ackTimeout = ackTimeout;
      return this;
    }

    public Builder maxDeliveries(int maxDeliveries) {
      this.maxDeliveries = maxDeliveries;
      return this;
    }

    /** Delayed delivery: not published before this time (at most one of this and delay). */
    public Builder deliverAfter(OffsetDateTime deliverAfter) {
      this.deliverAfter = deliverAfter;
      return this;
    }

    /** Delayed delivery: not published before this long after the prepare. */
    public Builder delay(Duration delay) {
      this.delay = delay;
      return this;
    }

    public Draft build() {
      return new Draft(this);
    }
  }
}
