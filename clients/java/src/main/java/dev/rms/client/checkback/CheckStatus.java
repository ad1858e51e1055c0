package dev.rms.client.checkback;

/** The answer to a check-back: did the local transaction commit? */
public enum CheckStatus {
  /** It committed: RMS confirms (publishes) the message. */
  COMMITTED("committed"),
  /** It rolled back, or never ran: RMS cancels the message. */
  ROLLED_BACK("rolled_back"),
  /** Not known yet: RMS asks again later. */
  UNKNOWN("unknown");

  private final String wire;

  CheckStatus(String wire) {
    this.wire = wire;
  }

  /** The value in the answer body. */
  public String wire() {
    return wire;
  }
}
