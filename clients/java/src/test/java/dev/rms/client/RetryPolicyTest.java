package dev.rms.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class RetryPolicyTest {
  private static final Instant NOW = Instant.parse("2026-11-26T09:00:00Z");

  @Test
  void retryAfterInSeconds() {
    assertEquals(Optional.of(Duration.ofSeconds(3)), RetryPolicy.parseRetryAfter("3", NOW));
    assertEquals(Optional.of(Duration.ZERO), RetryPolicy.parseRetryAfter(" 0 ", NOW));
  }

  @Test
  void retryAfterAsAnHttpDate() {
    assertEquals(Optional.of(Duration.ofSeconds(90)),
        RetryPolicy.parseRetryAfter("Thu, 26 Nov 2026 09:01:30 GMT", NOW));
    assertEquals(Optional.of(Duration.ZERO),
        RetryPolicy.parseRetryAfter("Thu, 26 Nov 2026 08:00:00 GMT", NOW), "a past date");
  }

  @Test
  void malformedOrAbsentRetryAfterIsIgnored() {
    for (String value : new String[] {null, "", "soon", "-1", "1.5", "99999999999999999999999"}) {
      assertEquals(Optional.empty(), RetryPolicy.parseRetryAfter(value, NOW), value);
    }
  }

  @Test
  void theDelayHonoursRetryAfterUpToTheCap() {
    RetryPolicy policy = new RetryPolicy(4, Duration.ofMillis(100), Duration.ofSeconds(2));
    assertEquals(Duration.ofSeconds(1), policy.delay(1, Optional.of(Duration.ofSeconds(1))));
    assertEquals(Duration.ofSeconds(2), policy.delay(1, Optional.of(Duration.ofSeconds(60))));
  }

  @Test
  void withoutRetryAfterTheBackoffDoublesWithJitterAndIsCapped() {
    RetryPolicy policy = new RetryPolicy(10, Duration.ofMillis(100), Duration.ofMillis(500));
    for (int i = 0; i < 50; i++) {
      long first = policy.delay(1, Optional.empty()).toMillis();
      long third = policy.delay(3, Optional.empty()).toMillis();
      long late = policy.delay(9, Optional.empty()).toMillis();
      assertTrue(first >= 50 && first <= 100, "attempt 1: " + first);
      assertTrue(third >= 200 && third <= 400, "attempt 3: " + third);
      assertTrue(late >= 250 && late <= 500, "capped: " + late);
    }
  }

  @Test
  void aPolicyNeedsAnAttempt() {
    assertThrows(IllegalArgumentException.class,
        () -> new RetryPolicy(0, Duration.ZERO, Duration.ZERO));
  }
}
