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
 * and {@code enable.auto.commit=false}, subscribed to its topics) and closes it.
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
  private final Tracer tracer = GlobalOpenTelemetry.getTracer("dev.rms.client");

  public RmsConsumer(Consumer<byte[], byte[]> consumer, JdbcInbox inbox, InboxHandler handler,
      Acker acker) {
    this.consumer = consumer;
    this.inbox = inbox;
    this.handler = handler;
    this.acker = acker;
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
