package dev.rms.client.signing;

/** The request is not provably RMS's: headers missing, no matching signature, or stale. */
public class SignatureException extends Exception {
  private static final long serialVersionUID = 1L;

  public SignatureException(String message) {
    super(message);
  }
}
