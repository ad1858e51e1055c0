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

  /**
   * The name of the app this acker's API key acts as ({@code GET /v1/apps/me}); empty when RMS
   * cannot tell (unreachable, or a release without the endpoint).
   *
   * @throws WrongAppException when RMS knows no such key (401)
   */
  public java.util.Optional<String> appOfKey() {
    try {
      String name = http.get("/v1/apps/me").path("name").asText("");
      return name.isEmpty() ? java.util.Optional.empty() : java.util.Optional.of(name);
    } catch (RmsException e) {
      if (!(e instanceof RmsUnavailableException) && e.status().orElse(0) == 401) {
        throw new WrongAppException("RMS does not know this consumer's API key: " + e.detail());
      }
      return java.util.Optional.empty();
    }
  }

  @Override
  public void close() {}
}
