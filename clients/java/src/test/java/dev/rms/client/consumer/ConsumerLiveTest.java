package dev.rms.client.consumer;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.LiveRms;
import dev.rms.client.Tracing;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.UUID;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A consumer receives an RMS record, handles it through the inbox, loses its first ack, gets
 * the redelivery, skips it as a duplicate and acknowledges it: once over HTTP, once as a signed
 * record on the ack topic.
 */
class ConsumerLiveTest {
  private static final Duration WITHIN = Duration.ofSeconds(40);
  private static LiveRms rms;
  private static DataSource db;

  @BeforeAll
  static void database() throws SQLException {
    rms = LiveRms.get();
    db = LiveRms.dataSource();
    try (Connection conn = db.getConnection(); Statement st = conn.createStatement()) {
      st.execute("CREATE TABLE IF NOT EXISTS points (message_id text, points int)");
    }
  }

  /** The acknowledgement that never reaches RMS: the consumer died before it. */
  private static final class LostAck implements Acker {
    @Override
    public Ack ack(String messageId) {
      return new Ack(messageId, Ack.Result.FAILED, 0, "consumer stopped before its ack");
    }

    @Override
    public void close() {}
  }

  @Test
  void aRedeliveryIsSkippedByTheInboxAndAcknowledgedOverHttp() throws Exception {
    Apps apps = apps("http");
    try (HttpAcker acker = new HttpAcker(rms.url, apps.consumer().apiKey())) {
      receiveDeduplicateAndAck(apps, acker);
    }
  }

  @Test
  void aRedeliveryIsSkippedByTheInboxAndAcknowledgedOnTheAckTopic() throws Exception {
    Apps apps = apps("topic");
    try (TopicAcker acker = TopicAcker.create(rms.bootstrapServers, apps.consumer().name(),
        apps.consumer().signingSecret(), rms.ackTopic)) {
      receiveDeduplicateAndAck(apps, acker);
    }
  }

  @Test
  void theHandlerAndTheAckContinueTheRecordsTrace() throws Exception {
    JdbcInbox inbox = new JdbcInbox(db, "points_inbox");
    inbox.createTable();
    String traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    RecordHeaders headers = new RecordHeaders();
    headers.add("rms-message-id", ("traced-" + UUID.randomUUID()).getBytes(UTF_8));
    headers.add("rms-delivery", "1".getBytes(UTF_8));
    headers.add("traceparent", traceparent.getBytes(UTF_8));
    ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>("t", 0, 0L, 0L,
        TimestampType.CREATE_TIME, 0, 0, null, "{\"points\":1}".getBytes(UTF_8), headers,
        Optional.empty());
    List<Map<String, String>> seen = new ArrayList<>();
    Acker recording = new Acker() {
      @Override
      public Ack ack(String messageId) {
        seen.add(Tracing.currentHeaders());
        return new Ack(messageId, Ack.Result.ACKED, 200, null);
      }

      @Override
      public void close() {}
    };
    try (MockConsumer<byte[], byte[]> unused = new MockConsumer<>("earliest")) {
      BatchReport report = new RmsConsumer(unused, inbox,
          (conn, message) -> seen.add(Tracing.currentHeaders()), recording)
          .handle(List.of(record));
      assertEquals(1, report.count(Outcome.PROCESSED));
    }
    // without an OpenTelemetry SDK the record's context is carried as it came
    assertEquals(List.of(Map.of("traceparent", traceparent), Map.of("traceparent", traceparent)),
        seen);
  }

  private record Apps(String topic, RmsProducer producer, String producerApp,
      LiveRms.App consumer) {}

  private static Apps apps(String role) {
    String topic = rms.topic("points-" + role);
    LiveRms.App producer = rms.createApp("emits", List.of(topic), List.of(),
        "http://127.0.0.1:9/");
    LiveRms.App consumer = rms.createApp("points", List.of(), List.of(topic),
        "http://127.0.0.1:9/");
    return new Apps(topic, RmsProducer.builder(rms.url, producer.apiKey())
        .defaultCheckUrl("http://127.0.0.1:9/rms/check").build(),
        producer.name(), consumer);
  }

  private static void receiveDeduplicateAndAck(Apps apps, Acker acker) throws Exception {
    JdbcInbox inbox = new JdbcInbox(db, "points_inbox");
    inbox.createTable();
    InboxHandler addPoints = (conn, record) -> {
      try (PreparedStatement st = conn.prepareStatement("INSERT INTO points VALUES (?, ?)")) {
        st.setString(1, record.messageId());
        st.setInt(2, record.payload().get("points").asInt());
        st.executeUpdate();
      }
    };
    MessageInfo sent = apps.producer().send(Draft.builder(apps.topic(), Map.of("points", 5))
        .ackTimeout(Duration.ofSeconds(2)).build());
    try (KafkaConsumer<byte[], byte[]> kafka = kafka(apps.topic())) {
      List<RmsRecord> seen = new ArrayList<>();
      RmsConsumer first = new RmsConsumer(kafka, inbox, addPoints, new LostAck());
      BatchReport handled = pollUntil(first, seen, sent.messageId(), 1);
      assertEquals(1, handled.count(Outcome.PROCESSED));
      RmsRecord record = handled.handled().get(0).record();
      assertEquals(apps.producerApp(), record.app());
      assertEquals(apps.topic(), record.topic());
      assertEquals(5, record.payload().get("points").asInt());
      assertEquals(Ack.Result.FAILED, handled.acks().get(0).result());

      int lastSeen = seen.stream().mapToInt(RmsRecord::delivery).max().orElseThrow();
      RmsConsumer again = new RmsConsumer(kafka, inbox, addPoints, acker);
      BatchReport redelivered = pollUntil(again, seen, sent.messageId(), lastSeen + 1);
      assertTrue(redelivered.count(Outcome.DUPLICATE) >= 1, "the inbox skips the redelivery");
      assertEquals(1, redelivered.acks().size(), "one ack per message and batch");
      assertEquals(0, redelivered.count(Outcome.PROCESSED));
      assertEquals(Ack.Result.ACKED, redelivered.acks().get(0).result(),
          String.valueOf(redelivered.acks()));
    }
    LiveRms.await("message " + sent.messageId() + " to be done", WITHIN,
        () -> "done".equals(apps.producer().get(sent.messageId()).state()));
    assertEquals(1, pointsRows(sent.messageId()), "the handler ran once");
  }

  /** Polls until a record of {@code messageId}, delivery {@code delivery} or later, came. */
  private static BatchReport pollUntil(RmsConsumer consumer, List<RmsRecord> seen,
      String messageId, int delivery) {
    Instant deadline = Instant.now().plus(WITHIN);
    while (Instant.now().isBefore(deadline)) {
      BatchReport report = consumer.pollOnce(Duration.ofMillis(500));
      List<RmsRecord> records = report.handled().stream().map(BatchReport.Handled::record)
          .toList();
      seen.addAll(records);
      if (records.stream().anyMatch(r -> r.messageId().equals(messageId)
          && r.delivery() >= delivery)) {
        return report;
      }
    }
    throw new AssertionError("no delivery " + delivery + "+ of " + messageId + " in " + WITHIN
        + "; seen " + seen.stream().map(r -> r.messageId() + "#" + r.delivery()).toList());
  }

  private static KafkaConsumer<byte[], byte[]> kafka(String topic) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, rms.bootstrapServers);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, "points-" + UUID.randomUUID());
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
        new ByteArrayDeserializer(), new ByteArrayDeserializer());
    consumer.subscribe(List.of(topic));
    return consumer;
  }

  private static int pointsRows(String messageId) throws SQLException {
    try (Connection conn = db.getConnection();
        PreparedStatement st = conn.prepareStatement(
            "SELECT count(*) FROM points WHERE message_id = ?")) {
      st.setString(1, messageId);
      try (ResultSet rows = st.executeQuery()) {
        rows.next();
        return rows.getInt(1);
      }
    }
  }
}
