package dev.rms.client.consumer;

/**
 * The app name a consumer was given is not the app its API key acts as ({@code GET
 * /v1/apps/me}), or RMS knows no such key: the consumer refuses to run, since RMS names the apps
 * that still owe a message in {@code rms-awaiting} and a consumer under another name would skip
 * every record.
 */
public final class WrongAppException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public WrongAppException(String message) {
    super(message);
  }
}
