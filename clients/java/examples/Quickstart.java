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

/** An order service: its check-back endpoint, then prepare, local commit, confirm. */
public class Quickstart {
  public static void main(String[] args) throws Exception {
    var db = new PGSimpleDataSource();
    db.setURL(System.getenv("JDBC_URL"));
    var barrier = new JdbcBarrier(db);
    barrier.createTable();
    int port = Integer.parseInt(System.getenv("CHECK_PORT"));
    var server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext("/rms/check", new CheckBackHttpHandler(
        CheckBackHandler.builder(List.of(System.getenv("RMS_SIGNING_SECRET")), barrier::resolve)
            .transactionResolver(barrier::resolveTransaction).build()));
    server.start(); // RMS asks here when a confirm never comes

    var rms = RmsProducer.builder(URI.create(System.getenv("RMS_URL")),
        System.getenv("RMS_API_KEY")).defaultCheckUrl("http://127.0.0.1:" + port + "/rms/check")
        .build();
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
    System.out.println(now.messageId() + " " + now.topic() + " " + now.state());
    server.stop(0);
  }
}
