package examples;

import com.sun.net.httpserver.HttpServer;
import dev.rms.client.barrier.JdbcBarrier;
import dev.rms.client.checkback.CheckBackHandler;
import dev.rms.client.checkback.CheckBackHttpHandler;
import dev.rms.client.producer.Draft;
import dev.rms.client.producer.MessageInfo;
import dev.rms.client.producer.RmsProducer;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.List;
import java.util.Map;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * An order service: its check-back endpoint, then prepare, local commit, confirm. Reads
 * RMS_URL, RMS_API_KEY, RMS_SIGNING_SECRET, JDBC_URL and CHECK_PORT.
 */
public class Quickstart {
  public static void main(String[] args) throws Exception {
    System.out.println(run(System.getenv("RMS_URL"), System.getenv("RMS_API_KEY"),
        System.getenv("RMS_SIGNING_SECRET"), System.getenv("JDBC_URL"),
        Integer.parseInt(System.getenv("CHECK_PORT"))));
  }

  static String run(String rmsUrl, String apiKey, String signingSecret, String jdbcUrl, int port)
      throws Exception {
    var db = new PGSimpleDataSource();
    db.setURL(jdbcUrl);
    var barrier = new JdbcBarrier(db);
    barrier.createTable();
    var server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext("/rms/check", new CheckBackHttpHandler(
        CheckBackHandler.builder(List.of(signingSecret), barrier::resolve)
            .transactionResolver(barrier::resolveTransaction).build()));
    server.start(); // RMS asks here when a confirm never comes

    var rms = RmsProducer.builder(URI.create(rmsUrl), apiKey)
        .defaultCheckUrl("http://127.0.0.1:" + port + "/rms/check").build();
    MessageInfo paid = rms.transactional(Draft.of("orders.paid", Map.of("order", 42)), m -> {
      try (var conn = db.getConnection()) { // the local transaction, barrier first
        conn.setAutoCommit(false);
        barrier.markCommitted(conn, m.messageId());
        // ... UPDATE orders SET paid = true WHERE id = 42, on conn ...
        conn.commit();
      }
      return m;
    }); // confirmed here; cancelled if the block threw
    MessageInfo now = rms.get(paid.messageId());
    server.stop(0);
    return now.messageId() + " " + now.topic() + " " + now.state();
  }
}
