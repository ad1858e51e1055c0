package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.LiveRms;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.RmsProducer;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.junit.jupiter.api.Test;

/**
 * A consumer that goes away without leaving its group (a crash: closed with {@code
 * REMAIN_IN_GROUP}) and comes back waits for the session timeout as a dynamic member; with an
 * instance id ({@link ConsumerSettings#forApp(String, String, String)}, static membership) it
 * handles the next message within seconds. Prints both gaps.
 */
class RestartLiveTest {
  private static final Duration STATIC_BOUND = Duration.ofSeconds(8);
  private static final Duration WITHIN = Duration.ofSeconds(90);

  @Test
  void aStaticMemberBackAfterACrashGetsItsPartitionAtOnce() throws Exception {
    LiveRms rms = LiveRms.get();
    String topic = rms.topic("points-restart");
    LiveRms.App shop = rms.createApp("restart-shop", List.of(topic), List.of(),
        "http://127.0.0.1:9/");
    RmsProducer producer = RmsProducer.builder(rms.url, shop.apiKey())
        .defaultCheckUrl("http://127.0.0.1:9/rms/check").build();
    JdbcInbox inbox = new JdbcInbox(LiveRms.dataSource(), "restart_inbox");
    inbox.createTable();
    Duration dynamic = gap(rms, producer, inbox, topic, false);
    Duration fixed = gap(rms, producer, inbox, topic, true);
    System.out.printf("restart gap after a crash: dynamic %.1f s, static %.1f s%n",
        dynamic.toMillis() / 1000.0, fixed.toMillis() / 1000.0);
    assertTrue(fixed.compareTo(STATIC_BOUND) < 0, "a static member waited " + fixed);
  }

  /** From a consumer's creation after another's crash to its handling of a message. */
  private static Duration gap(LiveRms rms, RmsProducer producer, JdbcInbox inbox, String topic,
      boolean fixed) throws Exception {
    LiveRms.App app = rms.createApp("restart-" + fixed, List.of(), List.of(topic),
        "http://127.0.0.1:9/");
    String instance = fixed ? app.name() + "-0" : null;
    Set<String> handled = ConcurrentHashMap.newKeySet();
    try (HttpAcker acker = new HttpAcker(rms.url, app.apiKey())) {
      KafkaConsumer<byte[], byte[]> crashing = consumer(rms, app, topic, instance);
      String first = producer.send(Draft.builder(topic, Map.of("n", 1)).build()).messageId();
      poll(new RmsConsumer(crashing, inbox, (conn, record) -> handled.add(record.messageId()),
          acker, app.name()), handled, first);
      crashing.close(CloseOptions.groupMembershipOperation(
          CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP));
      Instant restarted = Instant.now();
      try (KafkaConsumer<byte[], byte[]> back = consumer(rms, app, topic, instance)) {
        String second = producer.send(Draft.builder(topic, Map.of("n", 2)).build()).messageId();
        poll(new RmsConsumer(back, inbox, (conn, record) -> handled.add(record.messageId()),
            acker, app.name()), handled, second);
        return Duration.between(restarted, Instant.now());
      }
    }
  }

  private static KafkaConsumer<byte[], byte[]> consumer(LiveRms rms, LiveRms.App app,
      String topic, String instance) {
    KafkaConsumer<byte[], byte[]> kafka = new KafkaConsumer<>(
        ConsumerSettings.forApp(app.name(), rms.bootstrapServers, instance));
    kafka.subscribe(List.of(topic));
    return kafka;
  }

  private static void poll(RmsConsumer consumer, Set<String> handled, String messageId) {
    Instant deadline = Instant.now().plus(WITHIN);
    while (!handled.contains(messageId)) {
      assertTrue(Instant.now().isBefore(deadline), messageId + " not handled within " + WITHIN);
      consumer.pollOnce(Duration.ofMillis(200));
    }
  }
}
