package dev.rms.client.consumer;

import dev.rms.client.RetryPolicy;
import dev.rms.client.RmsException;
import dev.rms.client.RmsUnavailableException;
import dev.rms.client.internal.Ids;
import dev.rms.client.internal.RmsHttp;
import java.net.URI;
import java.time.Duration;

/**
 * {@code POST /v1/messages/{id}/ack} with the consumer app's API key, carrying the current trace
 * context. Network failures and overload are retried (see {@link RetryPolicy}); any other
 * refusal is final.
 */
public final class HttpAcker implements Acker {
  private final RmsHttp http;

  public HttpAcker(URI rmsUrl, String apiKey, Duration timeout, RetryPolicy retry) {
    this.http = new RmsHttp(rmsUrl, apiKey, RmsHttp.defaultClient(timeout), timeout, retry);
  }

  public HttpAcker(URI rmsUrl, String apiKey) {
    this(rmsUrl, apiKey, Duration.ofSeconds(10), RetryPolicy.DEFAULT);
  }

  /**
   * An HTTP ack is authenticated with the app's API key when it is made, so it cannot be
   * replayed from a log: {@code createdAt} is not needed and not sent.
   */
  @Override
  public Ack ack(String messageId, String createdAt) {
    return ack(messageId);
  }

  /** Acknowledges {@code messageId}. */
  public Ack ack(String messageId) {
    try {
      http.post("/v1/messages/" + Ids.segment(messageId) + "/ack", null);
      return new Ack(messageId, Ack.Result.ACKED, 200, null);
    } catch (RmsUnavailableException e) {
      return new Ack(messageId, Ack.Result.FAILED, e.status().orElse(0), e.detail());
    } catch (RmsException e) {
      return new Ack(messageId, Ack.Result.REFUSED, e.status().orElse(0), e.detail());
    }
  }

  @Override
  public void close() {}
}
