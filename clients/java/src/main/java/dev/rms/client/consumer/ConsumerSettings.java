package dev.rms.client.consumer;

import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Kafka consumer properties an {@link RmsConsumer} expects: byte-array deserializers, no
 * auto-commit, reading a new group's topics from the start, and the app's name as the consumer
 * group. Each consumer app needs a group of its own: Kafka gives each partition to one member
 * of a group, so an app sharing a group with another misses the records Kafka gives the other's
 * members ({@link RmsConsumer} logs a warning when the group is not the app's name).
 */
public final class ConsumerSettings {
  private ConsumerSettings() {}

  /** The properties for {@code app} on {@code bootstrapServers}; add security and the like. */
  public static Properties forApp(String app, String bootstrapServers) {
    return forApp(app, bootstrapServers, null);
  }

  /**
   * As {@link #forApp(String, String)}, with {@code instanceId} (when not null) as the static
   * group membership id ({@code group.instance.id}): one stable id per process of the app
   * (a pod or host name); a process restarted with the same id gets its partitions back at once
   * instead of after the session timeout.
   */
  public static Properties forApp(String app, String bootstrapServers, String instanceId) {
    Properties properties = new Properties();
    properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    properties.put(ConsumerConfig.GROUP_ID_CONFIG, app);
    properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    properties.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // a transaction's records (one Kafka transaction) arrive all or none, and a publish its
    // process never committed is never read (Kafka's default is read_uncommitted)
    properties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    properties.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    properties.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    if (instanceId != null) {
      properties.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
    }
    return properties;
  }
}
