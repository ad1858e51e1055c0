package dev.rms.client.checkback;

import java.time.Instant;

/**
 * Remembers the {@code webhook-id}s of accepted check-backs, so a captured call cannot be played
 * again within the timestamp tolerance. Several replicas behind a load balancer share one (for
 * example a table with the id as its primary key).
 */
@FunctionalInterface
public interface ReplayGuard {
  /** True the first time {@code webhookId} is seen; remember it until {@code rememberUntil}. */
  boolean firstUse(String webhookId, Instant rememberUntil);
}
