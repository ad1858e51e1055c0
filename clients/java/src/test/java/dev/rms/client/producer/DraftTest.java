package dev.rms.client.producer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The request bodies drafts become (field names of the contract, section 4). */
class DraftTest {
  @Test
  void aPrepareBodyHasTheContractsFieldsAndOnlyThoseGiven() {
    Draft draft = Draft.builder("orders.paid", Map.of("order", 42)).key("o-42")
        .header("source", "web").checkAfter(Duration.ofMillis(1500)).maxChecks(3)
        .ackTimeout(Duration.ofSeconds(30)).maxDeliveries(4)
        .deliverAfter(OffsetDateTime.parse("2026-11-26T10:00:00+01:00")).build();
    Map<String, Object> body = draft.body("m-1", "http://127.0.0.1:1/check");
    assertEquals(List.of("message_id", "topic", "payload", "key", "headers",
        "ack_timeout_seconds", "max_deliveries", "check_url", "check_after_seconds", "max_checks",
        "deliver_after"), List.copyOf(body.keySet()));
    assertEquals(1.5, body.get("check_after_seconds"));
    assertEquals("2026-11-26T10:00+01:00", body.get("deliver_after"));
    assertEquals("http://127.0.0.1:1/check", body.get("check_url"));
    assertEquals(List.of("message_id", "topic", "payload"),
        List.copyOf(Draft.of("t", 1).body("m-2", null).keySet()));
  }

  @Test
  void aDelayIsSecondsAfterThePrepare() {
    Map<String, Object> body = Draft.builder("t", 1).delay(Duration.ofMinutes(2)).build()
        .body("m", null);
    assertEquals(120.0, body.get("delay_seconds"));
    assertThrows(IllegalArgumentException.class, () -> Draft.builder("t", 1)
        .delay(Duration.ofSeconds(1)).deliverAfter(OffsetDateTime.now()).build());
  }

  @Test
  void aMessageOfATransactionLeavesTheCheckBackToTheTransaction() {
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () ->
        TransactionDraft.of(List.of(Draft.builder("t", 1).checkUrl("http://x/").build()))
            .body("tx", null));
    assertTrue(refused.getMessage().contains("checkUrl"), refused.getMessage());
    Map<String, Object> body = TransactionDraft.builder().checkUrl("http://127.0.0.1:1/c")
        .maxChecks(2).message(Draft.builder("t", 1).messageId("a").build()).build()
        .body("tx-1", null);
    assertEquals("tx-1", body.get("transaction_id"));
    assertEquals(2, body.get("max_checks"));
    assertEquals(List.of(Map.of("message_id", "a", "topic", "t", "payload", 1)),
        body.get("messages"));
  }

  @Test
  void anIdIsChosenOnceWhenTheDraftHasNone() {
    Draft draft = Draft.of("t", 1);
    String id = draft.idOrNew();
    assertTrue(id.matches("[0-9a-f]{26}"), id);
    assertEquals("kept", Draft.builder("t", 1).messageId("kept").build().idOrNew());
    assertThrows(IllegalArgumentException.class, () -> TransactionDraft.builder().build());
  }
}
