package dev.rms.client.consumer;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rms.client.LiveRms;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * Hostile records on a consumed topic (ids RMS never writes, a delivery of 5000 digits, null
 * and binary headers, values that are no JSON or hold huge numbers, no value at all) are set
 * aside and committed past; the RMS record behind them is handled and acknowledged.
 */
class HostileRecordsLiveTest {
  private static final Duration WITHIN = Duration.ofSeconds(40);

  /** A record of {@code topic} with one header. */
  private static ProducerRecord<byte[], byte[]> record(String topic, byte[] key, byte[] value,
      String header, byte[] headerValue) {
    RecordHeaders headers = new RecordHeaders();
    headers.add(header, headerValue);
    return new ProducerRecord<>(topic, (Integer) null, key, value, (Iterable<Header>) headers);
  }

  @Test
  void hostileRecordsNeverStopTheConsumer() throws Exception {
    LiveRms rms = LiveRms.get();
    String topic = rms.topic("points-hostile");
    LiveRms.App producerApp = rms.createApp("hostile", List.of(topic), List.of(),
        "http://127.0.0.1:9/");
    LiveRms.App consumerApp = rms.createApp("points", List.of(), List.of(topic),
        "http://127.0.0.1:9/");
    List<ProducerRecord<byte[], byte[]>> hostile = List.of(
        record(topic, null, "{".getBytes(UTF_8),
            RmsRecord.HEADER_MESSAGE_ID, "a/b\n".getBytes(UTF_8)),
        record(topic, null, "{}".getBytes(UTF_8),
            RmsRecord.HEADER_MESSAGE_ID, "m".repeat(5000).getBytes(UTF_8)),
        record(topic, "k".getBytes(UTF_8), null, RmsRecord.HEADER_MESSAGE_ID, null),
        record(topic, null, "\0not json".getBytes(UTF_8),
            RmsRecord.HEADER_MESSAGE_ID, new byte[] {(byte) 0xff, (byte) 0xfe}),
        record(topic, null, ("{\"n\": 1" + "0".repeat(400) + "}").getBytes(UTF_8),
            RmsRecord.HEADER_DELIVERY, "9".repeat(5000).getBytes(UTF_8)));
    try (KafkaProducer<byte[], byte[]> kafka = producer(rms)) {
      for (ProducerRecord<byte[], byte[]> record : hostile) {
        kafka.send(record).get(10, TimeUnit.SECONDS);
      }
    }
    RmsProducer producer = RmsProducer.builder(rms.url, producerApp.apiKey())
        .defaultCheckUrl("http://127.0.0.1:9/rms/check").build();
    MessageInfo sent = producer.send(Draft.builder(topic, Map.of("points", 3)).build());
    JdbcInbox inbox = new JdbcInbox(LiveRms.dataSource(), "hostile_inbox");
    inbox.createTable();
    int skipped = 0;
    List<String> handled = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> kafka = consumer(rms, topic);
        HttpAcker acker = new HttpAcker(rms.url, consumerApp.apiKey())) {
      RmsConsumer consumer = new RmsConsumer(kafka, inbox, (conn, record) -> { }, acker,
          consumerApp.name());
      Instant deadline = Instant.now().plus(WITHIN);
      while (!handled.contains(sent.messageId()) && Instant.now().isBefore(deadline)) {
        BatchReport report = consumer.pollOnce(Duration.ofMillis(500));
        skipped += report.skipped();
        report.handled().forEach(h -> handled.add(h.record().messageId()));
      }
    }
    assertEquals(List.of(sent.messageId()), handled);
    assertEquals(hostile.size(), skipped);
    LiveRms.await("message " + sent.messageId() + " to be done", WITHIN,
        () -> "done".equals(producer.get(sent.messageId()).state()));
  }

  private static KafkaProducer<byte[], byte[]> producer(LiveRms rms) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, rms.bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
  }

  private static KafkaConsumer<byte[], byte[]> consumer(LiveRms rms, String topic) {
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
}
