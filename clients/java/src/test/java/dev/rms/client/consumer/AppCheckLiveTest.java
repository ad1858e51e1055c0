package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.LiveRms;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.junit.jupiter.api.Test;

/**
 * A consumer whose app name is not the app of its API key ({@code GET /v1/apps/me}) refuses to
 * be made, with a line that says so; {@link ConsumerSettings} puts the consumer in the app's
 * group, and a consumer in another group is warned about.
 */
class AppCheckLiveTest {
  /** The messages {@link RmsConsumer} logs while {@code run} runs. */
  private static List<String> logged(Runnable run) {
    List<String> lines = new ArrayList<>();
    Logger logger = Logger.getLogger(RmsConsumer.class.getName());
    Handler handler = new Handler() {
      @Override
      public void publish(LogRecord record) {
        lines.add(java.text.MessageFormat.format(record.getMessage(), record.getParameters()));
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    logger.addHandler(handler);
    try {
      run.run();
    } finally {
      logger.removeHandler(handler);
    }
    return lines;
  }

  @Test
  void aMisspelledAppIsRefusedAndTheGroupIsTheAppsOwn() throws Exception {
    LiveRms rms = LiveRms.get();
    String topic = rms.topic("points-checked");
    LiveRms.App app = rms.createApp("checked", List.of(), List.of(topic), "http://127.0.0.1:9/");
    JdbcInbox inbox = new JdbcInbox(LiveRms.dataSource(), "checked_inbox");
    Properties settings = ConsumerSettings.forApp(app.name(), rms.bootstrapServers);
    assertEquals(app.name(), settings.get(ConsumerConfig.GROUP_ID_CONFIG));
    try (HttpAcker acker = new HttpAcker(rms.url, app.apiKey());
        KafkaConsumer<byte[], byte[]> kafka = new KafkaConsumer<>(settings)) {
      List<String> lines = logged(() -> {
        WrongAppException refused = assertThrows(WrongAppException.class,
            () -> new RmsConsumer(kafka, inbox, (conn, record) -> { }, acker, app.name() + "x"));
        assertTrue(refused.getMessage().contains("its API key is app '" + app.name() + "'s"),
            refused.getMessage());
      });
      assertTrue(lines.stream().anyMatch(line -> line.contains("refusing to run")), lines::toString);
      List<String> quiet = logged(() -> new RmsConsumer(kafka, inbox, (conn, r) -> { }, acker,
          app.name()));
      assertTrue(quiet.isEmpty(), quiet::toString);
    }
    Properties shared = ConsumerSettings.forApp(app.name(), rms.bootstrapServers);
    shared.put(ConsumerConfig.GROUP_ID_CONFIG, rms.prefix + "-shared");
    try (HttpAcker acker = new HttpAcker(rms.url, app.apiKey());
        KafkaConsumer<byte[], byte[]> kafka = new KafkaConsumer<>(shared)) {
      List<String> lines = logged(() -> new RmsConsumer(kafka, inbox, (conn, r) -> { }, acker,
          app.name()));
      assertTrue(lines.stream().anyMatch(line -> line.contains("group of its own")),
          lines::toString);
    }
  }
}
