package dev.rms.client.consumer;

import dev.rms.client.Tracing;
import dev.rms.client.internal.Json;
import dev.rms.client.signing.Signatures;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An ack as a record on the ack topic (design section 6): value {@code {"message_id",
 * "consumer", "created_at"}}, key the message id, signed in Standard Webhooks headers ({@code
 * webhook-id} a new UUID per ack, {@code webhook-timestamp}, {@code webhook-signature} over the
 * value bytes exactly as written) with the consumer app's signing secret, so writing to the
 * topic alone is not enough to finish a message. {@code created_at} is the acknowledged
 * record's {@code rms-created-at} header as it came: RMS applies the ack only to the message
 * with that id and that creation time, so a replayed record, or one read after the id was
 * freed and used again, never finishes a newer message. RMS applies the ack asynchronously:
 * {@code ACKED} means the broker holds the record.
 */
public final class TopicAcker implements Acker {
  public static final String DEFAULT_ACK_TOPIC = "rms.acks";
  private static final String NO_CREATED_AT = "an ack record needs the acknowledged record's "
      + "rms-created-at header; ack this one over HTTP";

  private final Producer<byte[], byte[]> producer;
  private final boolean ownsProducer;
  private final String consumerApp;
  private final List<String> secrets;
  private final String ackTopic;
  private final Duration timeout;
  private final Clock clock;

  /**
   * @param producer a byte-array producer to send with (closed by the caller)
   * @param consumerApp the app name RMS knows this consumer by
   * @param secrets that app's {@code whsec_} signing secret (both during a rotation)
   */
  public TopicAcker(Producer<byte[], byte[]> producer, String consumerApp, List<String> secrets,
      String ackTopic, Duration timeout) {
    this(producer, false, consumerApp, secrets, ackTopic, timeout);
  }

  private TopicAcker(Producer<byte[], byte[]> producer, boolean owns, String consumerApp,
      List<String> secrets, String ackTopic, Duration timeout) {
    if (secrets.isEmpty()) {
      throw new IllegalArgumentException("ack records need the consumer app's signing secret");
    }
    secrets.forEach(Signatures::webhook); // a malformed secret fails here, not at the first ack
    this.producer = producer;
    this.ownsProducer = owns;
    this.consumerApp = consumerApp;
    this.secrets = List.copyOf(secrets);
    this.ackTopic = ackTopic;
    this.timeout = timeout;
    this.clock = Clock.systemUTC();
  }

  /** The app this acker signs ack records for. */
  public String consumerApp() {
    return consumerApp;
  }

  /** An acker with its own producer on {@code bootstrapServers} (closed by {@link #close}). */
  public static TopicAcker create(String bootstrapServers, String consumerApp,
      String signingSecret, String ackTopic) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "rms-acker-" + consumerApp);
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props,
        new ByteArraySerializer(), new ByteArraySerializer());
    return new TopicAcker(producer, true, consumerApp, List.of(signingSecret), ackTopic,
        Duration.ofSeconds(10));
  }

  /**
   * The ack record's value for {@code messageId}, the instance created at {@code createdAt}
   * (the record's {@code rms-created-at} as it came).
   *
   * @throws IllegalArgumentException without {@code createdAt}: RMS refuses an ack record that
   *     names no instance
   */
  public byte[] value(String messageId, String createdAt) {
    if (createdAt == null || createdAt.isEmpty()) {
      throw new IllegalArgumentException(NO_CREATED_AT);
    }
    Map<String, String> value = new LinkedHashMap<>();
    value.put("message_id", messageId);
    value.put("consumer", consumerApp);
    value.put("created_at", createdAt);
    return Json.bytes(value);
  }

  /** The ack record: signed headers, then the current trace context (not signed). */
  public ProducerRecord<byte[], byte[]> record(String messageId, String createdAt) {
    byte[] value = value(messageId, createdAt);
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(ackTopic,
        messageId.getBytes(StandardCharsets.UTF_8), value);
    Map<String, String> signed = Signatures.signedHeaders(secrets, "ack_" + UUID.randomUUID(),
        clock.instant().getEpochSecond(), value);
    signed.forEach((name, text) -> record.headers().add(name, bytes(text)));
    Tracing.currentHeaders().forEach((name, text) -> record.headers().add(name, bytes(text)));
    return record;
  }

  /** REFUSED, nothing written, without {@code createdAt}. */
  @Override
  public Ack ack(String messageId, String createdAt) {
    if (createdAt == null || createdAt.isEmpty()) {
      return new Ack(messageId, Ack.Result.REFUSED, 0, NO_CREATED_AT);
    }
    try {
      producer.send(record(messageId, createdAt)).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      return new Ack(messageId, Ack.Result.ACKED, 0, null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Ack(messageId, Ack.Result.FAILED, 0, "interrupted");
    } catch (ExecutionException | TimeoutException | RuntimeException e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null
          ? e.getCause() : e;
      return new Ack(messageId, Ack.Result.FAILED, 0,
          cause.getClass().getSimpleName() + ": " + cause.getMessage());
    }
  }

  @Override
  public void close() {
    if (ownsProducer) {
      producer.close(Duration.ofSeconds(5));
    }
  }

  private static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
