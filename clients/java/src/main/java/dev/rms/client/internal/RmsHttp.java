package dev.rms.client.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.rms.client.RetryPolicy;
import dev.rms.client.RmsConflictException;
import dev.rms.client.RmsException;
import dev.rms.client.RmsNotFoundException;
import dev.rms.client.RmsUnavailableException;
import dev.rms.client.RmsValidationException;
import dev.rms.client.Tracing;
import dev.rms.client.Version;
import java.io.EOFException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * One RMS app's HTTP transport: JSON in and out, the app's bearer token, the caller's trace
 * context, and safe retries. Every RMS call is idempotent by id, so a call is repeated after
 * 408/429/502/503/504 (waiting what {@code Retry-After} asks) and after network errors; a connection
 * the server closed before any byte of the answer (an idle keep-alive connection it just dropped)
 * is tried again at once, without counting as an attempt.
 */
public final class RmsHttp {
  private static final Set<Integer> RETRY_STATUSES = Set.of(408, 429, 502, 503, 504);

  private final URI baseUrl;
  private final String authorization;
  private final HttpClient client;
  private final Duration timeout;
  private final RetryPolicy retry;

  public RmsHttp(URI baseUrl, String apiKey, HttpClient client, Duration timeout,
      RetryPolicy retry) {
    String base = baseUrl.toString();
    this.baseUrl = URI.create(base.endsWith("/") ? base.substring(0, base.length() - 1) : base);
    this.authorization = "Bearer " + apiKey;
    this.client = client;
    this.timeout = timeout;
    this.retry = retry;
  }

  /** A client with the settings RMS's answers need (HTTP/1.1, redirects never followed). */
  public static HttpClient defaultClient(Duration connectTimeout) {
    return HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .followRedirects(HttpClient.Redirect.NEVER)
        .connectTimeout(connectTimeout)
        .build();
  }

  /** POST {@code path} with {@code body} (JSON; null for none) and return the answer's JSON. */
  public JsonNode post(String path, Object body) {
    return call("POST", path, body == null ? null : Json.bytes(body));
  }

  public JsonNode get(String path) {
    return call("GET", path, null);
  }

  private JsonNode call(String method, String path, byte[] body) {
    HttpRequest request = request(method, path, body);
    boolean reopened = false;
    int attempt = 0;
    while (true) {
      attempt++;
      HttpResponse<byte[]> response;
      try {
        response = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
      } catch (IOException e) {
        if (!reopened && closedBeforeAnswer(e)) {
          reopened = true;
          attempt--;
          continue;
        }
        if (attempt >= retry.attempts()) {
          throw new RmsUnavailableException(0, describe(e), null, e);
        }
        pause(retry.delay(attempt, Optional.empty()));
        continue;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new RmsUnavailableException(0, "interrupted while calling RMS", null, e);
      }
      if (RETRY_STATUSES.contains(response.statusCode()) && attempt < retry.attempts()) {
        Optional<Duration> asked = RetryPolicy.parseRetryAfter(
            response.headers().firstValue("retry-after").orElse(null), Instant.now());
        pause(retry.delay(attempt, asked));
        continue;
      }
      return result(response);
    }
  }

  private HttpRequest request(String method, String path, byte[] body) {
    HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(baseUrl + path))
        .timeout(timeout)
        .header("Authorization", authorization)
        .header("Accept", "application/json")
        .header("User-Agent", Version.USER_AGENT);
    for (Map.Entry<String, String> header : Tracing.currentHeaders().entrySet()) {
      builder.header(header.getKey(), header.getValue());
    }
    if (body == null) {
      return builder.method(method, HttpRequest.BodyPublishers.noBody()).build();
    }
    return builder.header("Content-Type", "application/json")
        .method(method, HttpRequest.BodyPublishers.ofByteArray(body)).build();
  }

  /**
   * True when the server closed the connection before sending any byte of its answer: the
   * request may not have been read at all, and repeating it is safe because it is idempotent.
   */
  static boolean closedBeforeAnswer(IOException error) {
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      if (cause instanceof EOFException) {
        return true;
      }
      String message = String.valueOf(cause.getMessage()).toLowerCase(Locale.ROOT);
      if (message.contains("received no bytes") || message.contains("connection reset")
          || message.contains("eof reached")) {
        return true;
      }
    }
    return false;
  }

  private static RmsException error(int status, JsonNode problem, String reason) {
    String detail = problem.hasNonNull("detail") ? problem.get("detail").asText() : reason;
    switch (status) {
      case 404:
        return new RmsNotFoundException(detail, problem);
      case 409:
        return new RmsConflictException(detail, problem);
      case 422:
        return new RmsValidationException(detail, problem);
      default:
        if (RETRY_STATUSES.contains(status) || status >= 500) {
          return new RmsUnavailableException(status, detail, problem, null);
        }
        return new RmsException(status, detail, problem);
    }
  }

  private static JsonNode result(HttpResponse<byte[]> response) {
    int status = response.statusCode();
    Optional<JsonNode> json = Json.tree(response.body());
    if (status >= 200 && status < 300 && json.isPresent() && json.get().isObject()) {
      return json.get();
    }
    JsonNode problem = json.filter(JsonNode::isObject)
        .orElseGet(JsonNodeFactory.instance::objectNode);
    String reason = status >= 200 && status < 300 ? "answer is not a JSON object"
        : "HTTP " + status;
    throw error(status >= 200 && status < 300 ? 0 : status, problem, reason);
  }

  private static String describe(IOException e) {
    return e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
  }

  private static void pause(Duration wait) {
    try {
      Thread.sleep(wait.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RmsUnavailableException(0, "interrupted while waiting to retry", null, e);
    }
  }
}
