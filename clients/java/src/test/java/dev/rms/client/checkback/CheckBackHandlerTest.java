package dev.rms.client.checkback;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rms.client.signing.Signatures;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The framework-neutral handler: headers and body in, status and body out. */
class CheckBackHandlerTest {
  private static final String SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  private static final long NOW = 1_800_000_000L;
  private static final Clock CLOCK = Clock.fixed(Instant.ofEpochSecond(NOW), ZoneOffset.UTC);
  private static final String MESSAGE = "{\"message_id\":\"m-1\",\"app\":\"orders\","
      + "\"topic\":\"orders.paid\",\"key\":\"k\",\"headers\":{\"h\":\"v\"},"
      + "\"created_at\":\"2026-11-26T09:00:00Z\",\"check_count\":2,\"later_field\":true}";
  private static final String TRANSACTION = "{\"transaction_id\":\"t-1\",\"app\":\"orders\","
      + "\"message_ids\":[\"a\",\"b\",\"c\"],\"created_at\":\"2026-11-26T09:00:00Z\","
      + "\"check_count\":1}";

  private final List<Object> asked = new ArrayList<>();

  private CheckBackHandler.Builder builder() {
    return CheckBackHandler.builder(List.of(SECRET), request -> {
      asked.add(request);
      return CheckStatus.COMMITTED;
    }).clock(CLOCK);
  }

  private static CheckBackResponse call(CheckBackHandler handler, String id, String body) {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    return handler.handleSingle(Signatures.signedHeaders(List.of(SECRET), id, NOW, bytes), bytes);
  }

  @Test
  void aMessageCheckIsHandedToTheResolverAndAnswered() {
    CheckBackResponse response = call(builder().build(), "msg_m-1_2", MESSAGE);
    assertEquals(200, response.status());
    assertEquals("application/json", response.contentType());
    assertEquals("{\"status\":\"committed\"}", response.text());
    assertEquals(List.of(new CheckRequest("m-1", "orders", "orders.paid", "k", Map.of("h", "v"),
        "2026-11-26T09:00:00Z", 2)), asked);
  }

  @Test
  void aTransactionCheckGoesToTheTransactionResolver() {
    List<TransactionCheckRequest> transactions = new ArrayList<>();
    CheckBackHandler handler = builder().transactionResolver(request -> {
      transactions.add(request);
      return CheckStatus.ROLLED_BACK;
    }).build();
    assertEquals("{\"status\":\"rolled_back\"}", call(handler, "txn_t-1_1", TRANSACTION).text());
    assertEquals(List.of(new TransactionCheckRequest("t-1", "orders", List.of("a", "b", "c"),
        "2026-11-26T09:00:00Z", 1)), transactions);
    assertTrue(asked.isEmpty());
  }

  @Test
  void withoutATransactionResolverATransactionIsUnknown() {
    assertEquals("{\"status\":\"unknown\"}", call(builder().build(), "txn_t-1_1", TRANSACTION)
        .text());
  }

  @Test
  void aResolverThatThrowsAnswersUnknown() {
    CheckBackHandler handler = CheckBackHandler.builder(List.of(SECRET), request -> {
      throw new java.sql.SQLException("database down");
    }).clock(CLOCK).build();
    CheckBackResponse response = call(handler, "msg_m-1_2", MESSAGE);
    assertEquals(200, response.status());
    assertEquals("{\"status\":\"unknown\"}", response.text());
  }

  @Test
  void aReplayedWebhookIdIsRefused() {
    CheckBackHandler handler = builder().build();
    assertEquals(200, call(handler, "msg_m-1_2", MESSAGE).status());
    CheckBackResponse replay = call(handler, "msg_m-1_2", MESSAGE);
    assertEquals(409, replay.status());
    assertEquals("application/problem+json", replay.contentType());
    assertEquals(1, asked.size());
  }

  @Test
  void aSharedReplayGuardIsUsed() {
    List<String> ids = new ArrayList<>();
    CheckBackHandler handler = builder().replayGuard((id, until) -> {
      ids.add(id);
      return !id.endsWith("_9");
    }).build();
    assertEquals(200, call(handler, "msg_m-1_2", MESSAGE).status());
    assertEquals(409, call(handler, "msg_m-1_9", MESSAGE).status());
    assertEquals(List.of("msg_m-1_2", "msg_m-1_9"), ids);
  }

  @Test
  void anUnsignedOrStaleCallIsRefusedBeforeTheResolver() {
    CheckBackHandler handler = builder().build();
    byte[] body = MESSAGE.getBytes(StandardCharsets.UTF_8);
    assertEquals(401, handler.handleSingle(Map.of(), body).status());
    Map<String, String> stale = Signatures.signedHeaders(List.of(SECRET), "msg_m-1_3", NOW - 301,
        body);
    CheckBackResponse refused = handler.handleSingle(stale, body);
    assertEquals(401, refused.status());
    assertTrue(refused.text().contains("tolerance"), refused.text());
    assertTrue(asked.isEmpty());
  }

  @Test
  void aSignedBodyThatIsNotACheckIs422() {
    CheckBackHandler handler = builder().build();
    assertEquals(422, call(handler, "a", "[1,2]").status());
    CheckBackResponse missing = call(handler, "b", "{\"message_id\":\"m\",\"app\":\"a\"}");
    assertEquals(422, missing.status());
    assertTrue(missing.text().contains("topic, created_at, check_count"), missing.text());
    assertEquals(422, call(handler, "c", MESSAGE.replace("\"check_count\":2",
        "\"check_count\":\"2\"")).status());
    assertTrue(asked.isEmpty());
  }
}
