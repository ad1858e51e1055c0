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
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
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
    public Ack ack(String messageId, String createdAt) {
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
    RmsRecord acked;
    try (TopicAcker acker = TopicAcker.create(rms.bootstrapServers, apps.consumer().name(),
        apps.consumer().signingSecret(), rms.ackTopic)) {
      acked = receiveDeduplicateAndAck(apps, acker);
    }
    assertTrue(acked.createdAt() != null && !acked.createdAt().isEmpty(), "rms-created-at");
    assertEquals("{\"message_id\":\"" + acked.messageId() + "\",\"consumer\":\""
        + apps.consumer().name() + "\",\"created_at\":\"" + acked.createdAt() + "\"}",
        ackRecordValue(acked.messageId()), "the ack names the record's instance");
  }

  /**
   * An ack record naming another instance of the message id (a created_at one second off, as a
   * replayed record of an earlier message with the same id would) changes nothing: RMS refuses
   * it as stale and the message stays sent. A second message's ack, written after it on the
   * same partition, shows RMS has read it; the right created_at then finishes the message.
   */
  @Test
  void anAckRecordForAnotherInstanceOfTheIdLeavesTheMessageSent() throws Exception {
    Apps apps = apps("stale");
    MessageInfo target = apps.producer().send(Draft.builder(apps.topic(), Map.of("points", 1))
        .build());
    MessageInfo sentinel = apps.producer().send(Draft.builder(apps.topic(),
        Map.of("points", 2)).build());
    try (KafkaProducer<byte[], byte[]> kafka = producer()) {
      TopicAcker acker = new TopicAcker(kafka, apps.consumer().name(),
          List.of(apps.consumer().signingSecret()), rms.ackTopic, Duration.ofSeconds(10));
      String wrong = rfc3339(target.createdAt().plusSeconds(1));
      send(kafka, acker.record(target.messageId(), wrong), target.messageId());
      send(kafka, acker.record(sentinel.messageId(), rfc3339(sentinel.createdAt())),
          target.messageId());
      LiveRms.await("the ack written after the wrong one to apply", WITHIN,
          () -> "done".equals(apps.producer().get(sentinel.messageId()).state()));
      assertEquals("sent", apps.producer().get(target.messageId()).state(),
          "an ack naming created_at " + wrong + " (not the message's) is refused");
      send(kafka, acker.record(target.messageId(), rfc3339(target.createdAt())),
          target.messageId());
      LiveRms.await("the ack naming the message's created_at to apply", WITHIN,
          () -> "done".equals(apps.producer().get(target.messageId()).state()));
    }
  }

  private static String rfc3339(OffsetDateTime at) {
    return at.format(DateTimeFormatter.ISO_OFFSET_DATE_TIME);
  }

  /** Sends the ack record keyed by {@code key}, so records of one key keep their order. */
  private static void send(KafkaProducer<byte[], byte[]> kafka,
      ProducerRecord<byte[], byte[]> ack, String key) throws Exception {
    kafka.send(new ProducerRecord<>(ack.topic(), null, key.getBytes(UTF_8), ack.value(),
        ack.headers())).get(10, TimeUnit.SECONDS);
  }

  private static KafkaProducer<byte[], byte[]> producer() {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, rms.bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
  }

  /** The value of the ack record of {@code messageId} on the ack topic. */
  private static String ackRecordValue(String messageId) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, rms.bootstrapServers);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(props,
        new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      List<TopicPartition> partitions = reader.partitionsFor(rms.ackTopic).stream()
          .map(p -> new TopicPartition(p.topic(), p.partition())).toList();
      reader.assign(partitions);
      reader.seekToBeginning(partitions);
      Instant deadline = Instant.now().plus(WITHIN);
      while (Instant.now().isBefore(deadline)) {
        for (ConsumerRecord<byte[], byte[]> record : reader.poll(Duration.ofMillis(500))) {
          String value = new String(record.value(), UTF_8);
          if (value.contains("\"message_id\":\"" + messageId + "\"")) {
            return value;
          }
        }
      }
    }
    throw new AssertionError("no ack record of " + messageId + " on " + rms.ackTopic);
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
      public Ack ack(String messageId, String createdAt) {
        seen.add(Tracing.currentHeaders());
        return new Ack(messageId, Ack.Result.ACKED, 200, null);
      }

      @Override
      public void close() {}
    };
    try (MockConsumer<byte[], byte[]> unused = new MockConsumer<>("earliest")) {
      BatchReport report = new RmsConsumer(unused, inbox,
          (conn, message) -> seen.add(Tracing.currentHeaders()), recording, "points")
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

  /** Returns the record whose ack finished the message. */
  private static RmsRecord receiveDeduplicateAndAck(Apps apps, Acker acker) throws Exception {
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
    RmsRecord acked;
    try (KafkaConsumer<byte[], byte[]> kafka = kafka(apps.topic())) {
      List<RmsRecord> seen = new ArrayList<>();
      RmsConsumer first = new RmsConsumer(kafka, inbox, addPoints, new LostAck(),
          apps.consumer().name());
      BatchReport handled = pollUntil(first, seen, sent.messageId(), 1);
      assertEquals(1, handled.count(Outcome.PROCESSED));
      RmsRecord record = handled.handled().get(0).record();
      assertEquals(apps.producerApp(), record.app());
      assertEquals(apps.topic(), record.topic());
      assertEquals(5, record.payload().get("points").asInt());
      assertEquals(Ack.Result.FAILED, handled.acks().get(0).result());

      int lastSeen = seen.stream().mapToInt(RmsRecord::delivery).max().orElseThrow();
      RmsConsumer again = new RmsConsumer(kafka, inbox, addPoints, acker,
          apps.consumer().name());
      BatchReport redelivered = pollUntil(again, seen, sent.messageId(), lastSeen + 1);
      assertTrue(redelivered.count(Outcome.DUPLICATE) >= 1, "the inbox skips the redelivery");
      assertEquals(1, redelivered.acks().size(), "one ack per message and batch");
      assertEquals(0, redelivered.count(Outcome.PROCESSED));
      assertEquals(Ack.Result.ACKED, redelivered.acks().get(0).result(),
          String.valueOf(redelivered.acks()));
      acked = redelivered.handled().stream().map(BatchReport.Handled::record)
          .filter(r -> r.messageId().equals(sent.messageId())).findFirst().orElseThrow();
    }
    LiveRms.await("message " + sent.messageId() + " to be done", WITHIN,
        () -> "done".equals(apps.producer().get(sent.messageId()).state()));
    assertEquals(1, pointsRows(sent.messageId()), "the handler ran once");
    return acked;
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
