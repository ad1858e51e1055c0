package dev.rms.client.consumer;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapGetter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.KafkaException;

/**
 * At-least-once delivery with exactly-once effect: Kafka records, then inbox and handler (one
 * transaction of the consumer's database), then the ack, then the offset commit.
 *
 * <ol>
 *   <li>each record's {@code rms-message-id} is read ({@link RmsRecord});
 *   <li>the {@link JdbcInbox} runs the handler at most once per id (a redelivery is skipped);
 *   <li>only after that commit the message is acknowledged ({@link Acker}), a skipped duplicate
 *       too (the first ack may have been lost);
 *   <li>only after the acks the offsets are committed. A crash anywhere before that makes Kafka
 *       deliver the records again, and the inbox makes that harmless.
 * </ol>
 *
 * A handler that throws is neither acked nor retried in place: RMS redelivers the message when
 * its ack deadline passes, so one bad message never blocks its partition. The handler runs in a
 * span {@code rms.process} whose parent is the record's {@code traceparent}, and the ack carries
 * that context. The caller owns the Kafka consumer (configured with byte-array deserializers
 * and {@code enable.auto.commit=false}, subscribed to its topics: {@link ConsumerSettings}) and
 * closes it. Closing it leaves the group, so the partitions move on at once.
 *
 * <p>The constructor checks the app name against the app of an {@link HttpAcker}'s API key
 * ({@code GET /v1/apps/me}) and throws {@link WrongAppException} when they differ, and warns
 * when the Kafka consumer's group is not the app's name (each consumer app needs a group of its
 * own).
 *
 * <p>Several apps may consume one topic, and a message is done when each of them acked it. The
 * consumer acks as its own {@code app}. A record whose {@code rms-awaiting} header does not
 * name it is a redelivery for the others (this app acked already): it is skipped, neither
 * handled nor acknowledged, logged at INFO and reported as {@link Outcome#NOT_AWAITED}, and
 * committed past with its batch. A record without the header, or with one that cannot be read,
 * is handled.
 */
public final class RmsConsumer {
  private static final System.Logger LOG = System.getLogger(RmsConsumer.class.getName());
  private static final TextMapGetter<Map<String, String>> HEADERS = new TextMapGetter<>() {
    @Override
    @SuppressWarnings("deprecation") // still abstract in the API; W3C extraction never calls it
    public Iterable<String> keys(Map<String, String> carrier) {
      return carrier.keySet();
    }

    @Override
    public String get(Map<String, String> carrier, String key) {
      return carrier == null ? null : carrier.get(key);
    }
  };

  private final Consumer<byte[], byte[]> consumer;
  private final JdbcInbox inbox;
  private final InboxHandler handler;
  private final Acker acker;
  private final String app;
  private final Tracer tracer = GlobalOpenTelemetry.getTracer("dev.rms.client");

  /**
   * @param app the name RMS knows this consumer app by (null with a {@link TopicAcker}: the app
   *     it signs for)
   * @throws IllegalArgumentException when the app is unknown, not an app name, or not the
   *     TopicAcker's
   * @throws WrongAppException when the app is not the app of the {@link HttpAcker}'s API key
   */
  public RmsConsumer(Consumer<byte[], byte[]> consumer, JdbcInbox inbox, InboxHandler handler,
      Acker acker, String app) {
    this.consumer = consumer;
    this.inbox = inbox;
    this.handler = handler;
    this.acker = acker;
    this.app = consumerApp(app, acker);
    checkApp(this.app, acker);
    warnOnSharedGroup(this.app, consumer);
  }

  /** A consumer acking as the app its {@link TopicAcker} signs for. */
  public RmsConsumer(Consumer<byte[], byte[]> consumer, JdbcInbox inbox, InboxHandler handler,
      Acker acker) {
    this(consumer, inbox, handler, acker, null);
  }

  /** The app this consumer acks as. */
  public String app() {
    return app;
  }

  private static String consumerApp(String app, Acker acker) {
    String signsFor = acker instanceof TopicAcker topicAcker ? topicAcker.consumerApp() : null;
    String name = app != null ? app : signsFor;
    if (name == null) {
      throw new IllegalArgumentException("RmsConsumer needs the app, the name RMS knows this "
          + "consumer app by: it skips the records whose rms-awaiting header does not name it");
    }
    if (!AwaitingHeader.validAppName(name)) {
      throw new IllegalArgumentException("app '" + name + "' is not an RMS app name (a "
          + "lowercase letter or digit, then up to 62 of a-z, 0-9, '_' and '-')");
    }
    if (signsFor != null && !signsFor.equals(name)) {
      throw new IllegalArgumentException("app '" + name + "' differs from '" + signsFor
          + "', the app the TopicAcker signs ack records for");
    }
    return name;
  }

  /**
   * Refuses an app name that is not the app of the acker's API key; an acker without a key, or
   * an RMS that cannot tell, is logged and let through.
   */
  private static void checkApp(String app, Acker acker) {
    if (!(acker instanceof HttpAcker httpAcker)) {
      return;
    }
    Optional<String> actual;
    try {
      actual = httpAcker.appOfKey();
    } catch (WrongAppException e) {
      LOG.log(System.Logger.Level.ERROR, "wrong consumer app: {0}", e.getMessage());
      throw e;
    }
    if (actual.isEmpty()) {
      LOG.log(System.Logger.Level.WARNING,
          "could not check the consumer app {0} against its API key", app);
    } else if (!actual.get().equals(app)) {
      String line = "this consumer is configured as app '" + app + "', but its API key is app '"
          + actual.get() + "'s: it would skip every record RMS awaits from '" + actual.get()
          + "'; refusing to run (give the app '" + actual.get() + "', or use that app's key)";
      LOG.log(System.Logger.Level.ERROR, "wrong consumer app: {0}", line);
      throw new WrongAppException(line);
    }
  }

  /** A warning when the Kafka consumer's group is not the app's name (see ConsumerSettings). */
  private static void warnOnSharedGroup(String app, Consumer<byte[], byte[]> consumer) {
    String group;
    try {
      group = consumer.groupMetadata().groupId();
    } catch (RuntimeException e) { // no group (assigned partitions), or a consumer of the caller's
      return;
    }
    if (group != null && !group.equals(app)) {
      LOG.log(System.Logger.Level.WARNING, "the consumer group ''{0}'' is not the app''s name "
          + "''{1}'': each consumer app needs a group of its own, or it misses the records "
          + "Kafka gives the other apps'' members", group, app);
    }
  }

  /** Polls once, handles and acknowledges what came, then commits its offsets. */
  public BatchReport pollOnce(Duration timeout) {
    ConsumerRecords<byte[], byte[]> records = consumer.poll(timeout);
    if (records.isEmpty()) {
      return new BatchReport(List.of(), List.of(), 0);
    }
    List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>();
    records.forEach(all::add);
    BatchReport report = handle(all);
    try {
      consumer.commitSync();
    } catch (KafkaException e) { // e.g. a rebalance: the records may only come again
      LOG.log(System.Logger.Level.WARNING, "offset commit failed: {0}", e.getMessage());
    }
    return report;
  }

  /** Handles records in order (one transaction each), then acks the handled ones, each once. */
  public BatchReport handle(List<ConsumerRecord<byte[], byte[]>> records) {
    List<BatchReport.Handled> handled = new ArrayList<>();
    Map<String, Pending> toAck = new LinkedHashMap<>();
    int skipped = 0;
    for (ConsumerRecord<byte[], byte[]> record : records) {
      Optional<RmsRecord> parsed = RmsRecord.parse(record);
      if (parsed.isEmpty()) {
        LOG.log(System.Logger.Level.WARNING,
            "not an RMS record (no valid rms-message-id), set aside: {0}-{1} offset {2}",
            record.topic(), record.partition(), record.offset());
        skipped++;
        continue;
      }
      RmsRecord message = parsed.get();
      if (!message.awaits(app)) {
        LOG.log(System.Logger.Level.INFO, "{0} acked {1} already (rms-awaiting: {2}), skipped",
            app, message.messageId(), message.awaiting());
        handled.add(new BatchReport.Handled(message, Outcome.NOT_AWAITED));
        continue;
      }
      Span span = tracer.spanBuilder("rms.process").setSpanKind(SpanKind.CONSUMER)
          .setParent(W3CTraceContextPropagator.getInstance()
              .extract(Context.root(), message.headers(), HEADERS))
          .setAttribute("messaging.system", "kafka")
          .setAttribute("messaging.destination.name", message.topic())
          .setAttribute("rms.message_id", message.messageId())
          .setAttribute("rms.delivery", message.delivery())
          .startSpan();
      Context context = Context.root().with(span);
      Outcome outcome;
      try (Scope ignored = context.makeCurrent()) {
        outcome = inbox.process(message, handler);
        span.setAttribute("rms.outcome", outcome.name().toLowerCase(java.util.Locale.ROOT));
        if (outcome == Outcome.FAILED) {
          span.setStatus(StatusCode.ERROR, "handler failed");
        }
      } finally {
        span.end();
      }
      handled.add(new BatchReport.Handled(message, outcome));
      if (outcome.acks()) {
        toAck.putIfAbsent(message.messageId(), new Pending(message, context));
      }
    }
    List<Ack> acks = new ArrayList<>();
    toAck.values().forEach(pending -> acks.add(ack(pending.message(), pending.context())));
    return new BatchReport(List.copyOf(handled), List.copyOf(acks), skipped);
  }

  /** A handled record to acknowledge, with the context of its {@code rms.process} span. */
  private record Pending(RmsRecord message, Context context) {}

  /** The acker's answer; an acker that throws fails this ack alone (the message comes again). */
  private Ack ackOrFailure(RmsRecord message) {
    try {
      return acker.ack(message);
    } catch (RuntimeException e) {
      return new Ack(message.messageId(), Ack.Result.FAILED, 0,
          e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }

  /** Acknowledges the record's message id and instance (its {@code rms-created-at}). */
  private Ack ack(RmsRecord message, Context processing) {
    String messageId = message.messageId();
    Span span = tracer.spanBuilder("rms.ack").setSpanKind(SpanKind.CLIENT)
        .setParent(processing).setAttribute("rms.message_id", messageId).startSpan();
    try (Scope ignored = processing.with(span).makeCurrent()) {
      Ack ack = ackOrFailure(message);
      if (ack.result() != Ack.Result.ACKED) {
        span.setStatus(StatusCode.ERROR, ack.result() + ": " + ack.detail());
        LOG.log(System.Logger.Level.WARNING, "ack of {0} {1}: {2}", messageId, ack.result(),
            ack.detail());
      }
      return ack;
    } finally {
      span.end();
    }
  }
}
