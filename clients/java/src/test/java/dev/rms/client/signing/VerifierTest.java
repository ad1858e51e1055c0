package dev.rms.client.signing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Standard Webhooks verification, on the specification's own test vector. */
class VerifierTest {
  // the Standard Webhooks reference test vector
  private static final String SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  private static final String ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  private static final long TIMESTAMP = 1614265330L;
  private static final byte[] BODY = "{\"test\": 2432232314}".getBytes(StandardCharsets.UTF_8);
  private static final String SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  private static final String OTHER = "whsec_" + java.util.Base64.getEncoder()
      .encodeToString("another secret".getBytes(StandardCharsets.UTF_8));

  private static Verifier at(long epochSecond, List<String> secrets) {
    return new Verifier(secrets, Duration.ofMinutes(5),
        Clock.fixed(Instant.ofEpochSecond(epochSecond), ZoneOffset.UTC));
  }

  private static Map<String, List<String>> headers(String id, long timestamp, String signature) {
    return Map.of("Webhook-Id", List.of(id), "webhook-timestamp",
        List.of(Long.toString(timestamp)), "WEBHOOK-SIGNATURE", List.of(signature));
  }

  @Test
  void signsAsTheSpecificationSays() {
    assertEquals(SIGNATURE, Signatures.signedHeaders(List.of(SECRET), ID, TIMESTAMP, BODY)
        .get(Signatures.HEADER_SIGNATURE));
  }

  @Test
  void acceptsTheReferenceSignatureInAnyHeaderCase() throws SignatureException {
    Verifier.Verified verified = at(TIMESTAMP + 10, List.of(SECRET))
        .verify(headers(ID, TIMESTAMP, SIGNATURE), BODY);
    assertEquals(ID, verified.webhookId());
    assertEquals(Instant.ofEpochSecond(TIMESTAMP), verified.timestamp());
  }

  @Test
  void acceptsEitherSecretDuringARotationAndIgnoresOtherVersions() throws SignatureException {
    String header = "v2,abc v1,bm90IGl0 " + SIGNATURE;
    at(TIMESTAMP, List.of(OTHER, SECRET)).verify(headers(ID, TIMESTAMP, header), BODY);
  }

  @Test
  void refusesAForgedSignature() {
    SignatureException forged = assertThrows(SignatureException.class,
        () -> at(TIMESTAMP, List.of(OTHER)).verify(headers(ID, TIMESTAMP, SIGNATURE), BODY));
    assertTrue(forged.getMessage().contains("no webhook-signature matches"));
    assertThrows(SignatureException.class, () -> at(TIMESTAMP, List.of(SECRET))
        .verify(headers(ID, TIMESTAMP, SIGNATURE), "{\"test\": 1}".getBytes(
            StandardCharsets.UTF_8)), "another body");
    assertThrows(SignatureException.class, () -> at(TIMESTAMP, List.of(SECRET))
        .verify(headers("msg_other", TIMESTAMP, SIGNATURE), BODY), "another id");
  }

  @Test
  void refusesStaleAndFutureTimestamps() {
    SignatureException stale = assertThrows(SignatureException.class,
        () -> at(TIMESTAMP + 301, List.of(SECRET)).verify(headers(ID, TIMESTAMP, SIGNATURE),
            BODY));
    assertTrue(stale.getMessage().contains("tolerance"), stale.getMessage());
    assertThrows(SignatureException.class, () -> at(TIMESTAMP - 301, List.of(SECRET))
        .verify(headers(ID, TIMESTAMP, SIGNATURE), BODY));
  }

  @Test
  void refusesMissingOrMalformedHeaders() {
    SignatureException missing = assertThrows(SignatureException.class,
        () -> at(TIMESTAMP, List.of(SECRET)).verify(Map.of(), BODY));
    assertEquals("missing header(s): webhook-id, webhook-timestamp, webhook-signature",
        missing.getMessage());
    assertThrows(SignatureException.class, () -> at(TIMESTAMP, List.of(SECRET))
        .verify(Map.of("webhook-id", List.of(ID), "webhook-timestamp", List.of("yesterday"),
            "webhook-signature", List.of(SIGNATURE)), BODY));
  }

  @Test
  void aMalformedSecretIsAClearError() {
    assertThrows(IllegalArgumentException.class, () -> new Verifier(List.of("whsec_%%%")));
    assertThrows(IllegalArgumentException.class, () -> new Verifier(List.of()));
  }
}
