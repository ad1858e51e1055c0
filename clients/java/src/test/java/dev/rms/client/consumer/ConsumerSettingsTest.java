package dev.rms.client.consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.junit.jupiter.api.Test;

/**
 * The consumer properties read read_committed: a transaction's records arrive all or none, and
 * a publish RMS never committed is never read (Kafka's default is read_uncommitted).
 */
class ConsumerSettingsTest {
  @Test
  void readsCommittedRecordsOnly() {
    Properties properties = ConsumerSettings.forApp("points", "127.0.0.1:9092");
    assertEquals("read_committed", properties.get(ConsumerConfig.ISOLATION_LEVEL_CONFIG));
    assertEquals("points", properties.get(ConsumerConfig.GROUP_ID_CONFIG));
  }
}
