package dev.rms.client;

import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How a call to RMS is retried: at most {@code attempts} attempts in all, waiting doubling
 * backoff with jitter between them (from {@code backoff}, capped at {@code maxBackoff}), or what
 * RMS's {@code Retry-After} asks for (also capped). Retrying is safe because every RMS call is
 * idempotent by its id.
 */
public record RetryPolicy(int attempts, Duration backoff, Duration maxBackoff) {
  public static final RetryPolicy DEFAULT =
      new RetryPolicy(4, Duration.ofMillis(200), Duration.ofSeconds(5));

  public RetryPolicy {
    if (attempts < 1) {
      throw new IllegalArgumentException("attempts must be at least 1, not " + attempts);
    }
    if (backoff.isNegative() || maxBackoff.isNegative()) {
      throw new IllegalArgumentException("backoff durations must not be negative");
    }
  }

  /** No retry: one attempt (a connection closed before any answer is still tried again once). */
  public static RetryPolicy none() {
    return new RetryPolicy(1, Duration.ZERO, Duration.ZERO);
  }

  /**
   * The wait before attempt {@code attempt + 1}: the {@code Retry-After} value when there is a
   * valid one, else doubling backoff with jitter; never more than {@code maxBackoff}.
   */
  public Duration delay(int attempt, Optional<Duration> retryAfter) {
    if (retryAfter.isPresent()) {
      return min(retryAfter.get(), maxBackoff);
    }
    double base = backoff.toMillis() * Math.pow(2, Math.max(0, attempt - 1));
    double capped = Math.min(base, maxBackoff.toMillis());
    return Duration.ofMillis((long) (capped * ThreadLocalRandom.current().nextDouble(0.5, 1.0)));
  }

  /**
   * A {@code Retry-After} header value as a wait from {@code now}: delay-seconds or an HTTP-date
   * (RFC 9110); empty when absent or malformed, a date in the past is a zero wait.
   */
  public static Optional<Duration> parseRetryAfter(String value, Instant now) {
    if (value == null || value.isBlank()) {
      return Optional.empty();
    }
    String text = value.trim();
    if (text.chars().allMatch(Character::isDigit)) {
      try {
        return Optional.of(Duration.ofSeconds(Long.parseLong(text)));
      } catch (NumberFormatException tooLong) {
        return Optional.empty();
      }
    }
    try {
      Instant at = ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
      return Optional.of(at.isAfter(now) ? Duration.between(now, at) : Duration.ZERO);
    } catch (DateTimeParseException notADate) {
      return Optional.empty();
    }
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }
}
