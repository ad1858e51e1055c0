package dev.rms.client;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rms.client.internal.Json;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The live RMS the tests run against, from the environment the test harness sets ({@code
 * RMS_URL}, {@code RMS_ADMIN_TOKEN}, {@code RMS_KAFKA_BOOTSTRAP_SERVERS}, {@code RMS_ACK_TOPIC},
 * {@code RMS_TEST_PG_*}, {@code RMS_TEST_PREFIX}). Without it the live tests are skipped with
 * that reason (the pytest entry always sets it).
 */
public final class LiveRms {
  private static final HttpClient HTTP = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();

  public final URI url;
  public final String adminToken;
  public final String bootstrapServers;
  public final String ackTopic;
  public final String prefix;

  private LiveRms() {
    this.url = URI.create(env("RMS_URL"));
    this.adminToken = env("RMS_ADMIN_TOKEN");
    this.bootstrapServers = env("RMS_KAFKA_BOOTSTRAP_SERVERS");
    this.ackTopic = env("RMS_ACK_TOPIC");
    this.prefix = env("RMS_TEST_PREFIX");
  }

  /**
   * The live RMS. Without the harness environment the calling tests are skipped with that
   * reason, unless {@code -Drms.live=required} (as the pytest entry runs them): then they fail.
   */
  public static LiveRms get() {
    boolean present = System.getenv("RMS_URL") != null
        && System.getenv("RMS_TEST_PG_HOST") != null;
    String reason = "no live RMS: RMS_URL or RMS_TEST_PG_HOST unset (run through "
        + "tests/system/clients/test_java.py)";
    if ("required".equals(System.getProperty("rms.live"))) {
      assertTrue(present, reason);
    }
    assumeTrue(present, reason);
    return new LiveRms();
  }

  /** An app registered with RMS. */
  public record App(String name, String apiKey, String signingSecret) {}

  /**
   * A new app named {@code <prefix>-<role>-<random>}, whose check URLs must start with {@code
   * checkPrefix} (scheme, host and port of the check-back server, then a path).
   */
  public App createApp(String role, List<String> produceTopics, List<String> consumeTopics,
      String checkPrefix) {
    String name = prefix + "-" + role + "-" + UUID.randomUUID().toString().substring(0, 6);
    Map<String, Object> body = Map.of("name", name, "produce_topics", produceTopics,
        "consume_topics", consumeTopics, "check_url_prefixes", List.of(checkPrefix));
    HttpRequest request = HttpRequest.newBuilder(URI.create(url + "/v1/admin/apps"))
        .header("Authorization", "Bearer " + adminToken)
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(Json.bytes(body))).build();
    try {
      HttpResponse<byte[]> response = HTTP.send(request, HttpResponse.BodyHandlers.ofByteArray());
      JsonNode app = Json.tree(response.body()).orElseThrow();
      if (response.statusCode() != 201) {
        throw new IllegalStateException("creating app " + name + ": " + app);
      }
      return new App(name, app.get("api_key").asText(), app.get("signing_secret").asText());
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** The message as the admin API shows it ({@code GET /v1/admin/messages/{id}}). */
  public JsonNode adminMessage(String messageId) {
    HttpRequest request = HttpRequest.newBuilder(URI.create(url + "/v1/admin/messages/"
        + messageId)).header("Authorization", "Bearer " + adminToken).GET().build();
    try {
      HttpResponse<byte[]> response = HTTP.send(request, HttpResponse.BodyHandlers.ofByteArray());
      JsonNode message = Json.tree(response.body()).orElseThrow();
      if (response.statusCode() != 200) {
        throw new IllegalStateException("message " + messageId + ": " + message);
      }
      return message;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A topic name unique to this run. */
  public String topic(String name) {
    return name + "." + prefix + "." + UUID.randomUUID().toString().substring(0, 6);
  }

  /** The client tests' own PostgreSQL database. */
  public static DataSource dataSource() {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setServerNames(new String[] {env("RMS_TEST_PG_HOST")});
    ds.setPortNumbers(new int[] {Integer.parseInt(env("RMS_TEST_PG_PORT"))});
    ds.setUser(env("RMS_TEST_PG_USER"));
    String password = System.getenv("RMS_TEST_PG_PASSWORD");
    if (password != null && !password.isEmpty()) {
      ds.setPassword(password);
    }
    ds.setDatabaseName(env("RMS_TEST_PG_DATABASE"));
    return ds;
  }

  /** Waits until {@code condition} holds, failing after {@code timeout}. */
  public static void await(String what, Duration timeout, BooleanSupplier condition)
      throws InterruptedException {
    Instant deadline = Instant.now().plus(timeout);
    while (!condition.getAsBoolean()) {
      if (Instant.now().isAfter(deadline)) {
        throw new AssertionError("timed out after " + timeout + " waiting for " + what);
      }
      Thread.sleep(200);
    }
  }

  private static String env(String name) {
    String value = System.getenv(name);
    if (value == null) {
      throw new IllegalStateException(name + " is not set");
    }
    return value;
  }
}
