import com.sun.net.httpserver.HttpServer;
import dev.rms.client.checkback.CheckBackHandler;
import dev.rms.client.checkback.CheckBackHttpHandler;
import dev.rms.client.checkback.CheckStatus;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.List;
import java.util.Map;

/** A producer-only service: the check-back endpoint, then prepare, commit, confirm. */
public final class Producer {
  public static void main(String[] args) throws Exception {
    Map<String, String> env = System.getenv();
    int port = Integer.parseInt(env.get("CHECK_PORT"));
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext("/rms/check", new CheckBackHttpHandler(CheckBackHandler.builder(
        List.of(env.get("RMS_SIGNING_SECRET")), check -> CheckStatus.COMMITTED).build()));
    server.start();
    RmsProducer rms = RmsProducer.builder(URI.create(env.get("RMS_URL")), env.get("RMS_API_KEY"))
        .defaultCheckUrl("http://127.0.0.1:" + port + "/rms/check").build();
    MessageInfo sent = rms.transactional(
        Draft.builder(env.get("TOPIC"), Map.of("order", 42)).build(), prepared -> prepared);
    System.out.println(sent.messageId() + " " + rms.get(sent.messageId()).state());
    server.stop(0);
  }
}
