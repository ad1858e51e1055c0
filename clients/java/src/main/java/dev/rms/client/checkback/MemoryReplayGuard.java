package dev.rms.client.checkback;

import java.time.Clock;
import java.time.Instant;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * The ids seen within the tolerance window, in this process. An id older than the window is
 * refused by its timestamp anyway, so forgetting it then is safe.
 */
public final class MemoryReplayGuard implements ReplayGuard {
  private final ConcurrentMap<String, Instant> seen = new ConcurrentHashMap<>();
  private final Clock clock;
  private volatile Instant nextPrune = Instant.MIN;

  public MemoryReplayGuard(Clock clock) {
    this.clock = clock;
  }

  public MemoryReplayGuard() {
    this(Clock.systemUTC());
  }

  @Override
  public boolean firstUse(String webhookId, Instant rememberUntil) {
    Instant now = clock.instant();
    if (now.isAfter(nextPrune)) {
      seen.values().removeIf(until -> !until.isAfter(now));
      nextPrune = now.plusSeconds(10);
    }
    return seen.putIfAbsent(webhookId, rememberUntil) == null;
  }
}
