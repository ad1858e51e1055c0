import dev.rms.client.consumer.Ack;
import dev.rms.client.consumer.HttpAcker;
import dev.rms.client.consumer.RmsRecord;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;

/** A consuming service: reads the topic's RMS records and acknowledges each over HTTP. */
public final class Consumer {
  public static void main(String[] args) {
    Map<String, String> env = System.getenv();
    Properties settings = new Properties();
    settings.put("bootstrap.servers", env.get("RMS_KAFKA_BOOTSTRAP_SERVERS"));
    settings.put("group.id", "release-check-" + env.get("TOPIC"));
    settings.put("auto.offset.reset", "earliest");
    settings.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    settings.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    HttpAcker acker = new HttpAcker(URI.create(env.get("RMS_URL")), env.get("RMS_CONSUMER_KEY"));
    Instant deadline = Instant.now().plusSeconds(60);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(settings)) {
      consumer.subscribe(List.of(env.get("TOPIC")));
      while (Instant.now().isBefore(deadline)) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
          RmsRecord message = RmsRecord.parse(record).orElseThrow();
          Ack ack = acker.ack(message.messageId());
          System.out.println(message.messageId() + " " + ack.result());
          return;
        }
      }
    }
    throw new IllegalStateException("no record came in 60 s");
  }
}
