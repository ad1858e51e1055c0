package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rms.client.LiveRms;
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
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

/**
 * Two consumer apps on one topic: points handles the message and acks it; billing handles it
 * and its process dies as it acks (nothing acked, no offset committed). RMS redelivers the
 * message naming only billing in {@code rms-awaiting}: points' consumer skips the redelivery,
 * billing's restarted consumer handles it (its inbox knows the id) and acks, and the message is
 * done with both acks.
 */
class TwoConsumersLiveTest {
  private static final Duration WITHIN = Duration.ofSeconds(60);

  /** The consumer's process dying: nothing in the consumer catches it. */
  private static final class Crash extends Error {
    private static final long serialVersionUID = 1L;

    Crash(String messageId) {
      super("the consumer's process died acking " + messageId);
    }
  }

  /** Dies at the first ack, as a process killed after its handler committed would. */
  private static final class CrashingAcker implements Acker {
    final List<String> asked = new ArrayList<>();

    @Override
    public Ack ack(String messageId, String createdAt) {
      asked.add(messageId);
      throw new Crash(messageId);
    }

    @Override
    public void close() {}
  }

  /** A consumer app with its own inbox and effects tables and its own consumer group. */
  private static final class Service {
    final LiveRms.App app;
    final String topic;
    final String table;
    final JdbcInbox inbox;
    final DataSource db;
    final Map<String, List<Outcome>> outcomes = new HashMap<>();

    Service(LiveRms rms, DataSource db, String role, String topic) throws SQLException {
      this.app = rms.createApp(role, List.of(), List.of(topic), "http://127.0.0.1:9/");
      this.db = db;
      this.topic = topic;
      this.table = "two_" + role;
      this.inbox = new JdbcInbox(db, table + "_inbox");
      inbox.createTable();
      try (Connection conn = db.getConnection(); Statement st = conn.createStatement()) {
        st.execute("CREATE TABLE " + table + "_effects (message_id text)");
      }
    }

    RmsConsumer consumer(KafkaConsumer<byte[], byte[]> kafka, Acker acker) {
      return new RmsConsumer(kafka, inbox, (conn, record) -> {
        try (PreparedStatement st = conn.prepareStatement(
            "INSERT INTO " + table + "_effects VALUES (?)")) {
          st.setString(1, record.messageId());
          st.executeUpdate();
        }
      }, acker, app.name());
    }

    void pollUntil(RmsConsumer consumer, String what, BooleanSupplier done) {
      Instant deadline = Instant.now().plus(WITHIN);
      while (!done.getAsBoolean()) {
        assertTrue(Instant.now().isBefore(deadline), "not within " + WITHIN + ": " + what
            + " (outcomes " + outcomes + ")");
        for (BatchReport.Handled handled : consumer.pollOnce(Duration.ofMillis(500)).handled()) {
          outcomes.computeIfAbsent(handled.record().messageId(), id -> new ArrayList<>())
              .add(handled.outcome());
        }
      }
    }

    List<Outcome> of(String messageId) {
      return outcomes.getOrDefault(messageId, List.of());
    }

    int effects(String messageId) throws SQLException {
      try (Connection conn = db.getConnection(); PreparedStatement st = conn.prepareStatement(
          "SELECT count(*) FROM " + table + "_effects WHERE message_id = ?")) {
        st.setString(1, messageId);
        try (ResultSet rows = st.executeQuery()) {
          rows.next();
          return rows.getInt(1);
        }
      }
    }
  }

  @Test
  void oneAppAcksAndSkipsTheRedeliveryTheOtherCrashesAndAcksAfterItsRestart() throws Exception {
    LiveRms rms = LiveRms.get();
    DataSource db = LiveRms.dataSource();
    String topic = rms.topic("paid");
    LiveRms.App shop = rms.createApp("two-shop", List.of(topic), List.of(),
        "http://127.0.0.1:9/");
    Service points = new Service(rms, db, "points", topic);
    Service billing = new Service(rms, db, "billing", topic);
    RmsProducer producer = RmsProducer.builder(rms.url, shop.apiKey())
        .defaultCheckUrl("http://127.0.0.1:9/rms/check").build();
    MessageInfo sent = producer.send(Draft.builder(topic, Map.of("order", 7))
        .ackTimeout(Duration.ofSeconds(2)).build());
    String id = sent.messageId();

    CrashingAcker crashing = new CrashingAcker();
    try (KafkaConsumer<byte[], byte[]> kafka = kafka(rms, billing)) {
      RmsConsumer dying = billing.consumer(kafka, crashing);
      assertThrows(Crash.class, () -> billing.pollUntil(dying, "billing to handle the record",
          () -> false));
    }
    assertEquals(List.of(id), crashing.asked);
    assertEquals(1, billing.effects(id));

    try (KafkaConsumer<byte[], byte[]> kafka = kafka(rms, points);
        HttpAcker acker = new HttpAcker(rms.url, points.app.apiKey())) {
      points.pollUntil(points.consumer(kafka, acker),
          "points to handle and ack the message, then skip its redelivery",
          () -> points.of(id).contains(Outcome.NOT_AWAITED));
    }
    assertEquals(Outcome.PROCESSED, points.of(id).get(0), String.valueOf(points.outcomes));
    assertEquals(1, points.effects(id), "the skipped redelivery touched nothing");
    MessageInfo waiting = producer.get(id);
    assertEquals("sent", waiting.state());
    assertTrue(waiting.deliveryCount() >= 2, String.valueOf(waiting));

    try (KafkaConsumer<byte[], byte[]> kafka = kafka(rms, billing);
        HttpAcker acker = new HttpAcker(rms.url, billing.app.apiKey())) {
      billing.pollUntil(billing.consumer(kafka, acker), "billing's restarted consumer to ack",
          () -> "done".equals(producer.get(id).state()));
    }
    assertFalse(billing.of(id).isEmpty());
    assertTrue(billing.of(id).stream().allMatch(o -> o == Outcome.DUPLICATE),
        "its inbox had the id: " + billing.of(id));
    assertEquals(1, billing.effects(id));
    Map<String, JsonNode> subscribers = new HashMap<>();
    rms.adminMessage(id).get("subscribers").forEach(s -> subscribers.put(s.get("app").asText(), s));
    assertEquals(2, subscribers.size(), String.valueOf(subscribers));
    for (Service service : List.of(points, billing)) {
      JsonNode subscriber = subscribers.get(service.app.name());
      assertTrue(subscriber != null && !subscriber.get("acked_at").isNull()
          && "http".equals(subscriber.get("via").asText()), String.valueOf(subscribers));
    }
  }

  private static KafkaConsumer<byte[], byte[]> kafka(LiveRms rms, Service service) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, rms.bootstrapServers);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, service.app.name());
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
        new ByteArrayDeserializer(), new ByteArrayDeserializer());
    consumer.subscribe(List.of(service.topic));
    return consumer;
  }
}
