package dev.rms.client.checkback;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rms.client.internal.Json;
import dev.rms.client.signing.SignatureException;
import dev.rms.client.signing.Verifier;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The producer's check-back endpoint, free of any web framework: from a request's headers and
 * raw body to the status and body to answer. It proves the call is RMS's (Standard Webhooks
 * signature over the raw body with the app's signing secret, timestamp within tolerance, each
 * {@code webhook-id} used once), hands it to the application's resolver for a message or a
 * transaction, and answers {@code {"status": "committed" | "rolled_back" | "unknown"}}.
 *
 * <ul>
 *   <li>401 problem document: signature missing, wrong or stale;
 *   <li>409: the {@code webhook-id} was already used (a replay);
 *   <li>422: the body is not a check-back request;
 *   <li>200 {@code unknown}: the resolver threw, or a transaction came without a transaction
 *       resolver (RMS asks again later).
 * </ul>
 *
 * <p>Adapters: {@link CheckBackHttpHandler} (the JDK's {@code HttpServer}) and {@link
 * CheckBackFilter} (a Jakarta Servlet filter, for Spring MVC and any servlet container).
 */
public final class CheckBackHandler {
  private static final System.Logger LOG = System.getLogger(CheckBackHandler.class.getName());

  private final Verifier verifier;
  private final Duration tolerance;
  private final ReplayGuard replayGuard;
  private final Resolver<CheckRequest> resolver;
  private final Resolver<TransactionCheckRequest> transactionResolver;

  private CheckBackHandler(Builder b) {
    this.verifier = new Verifier(b.secrets, b.tolerance, b.clock);
    this.tolerance = b.tolerance;
    this.replayGuard = b.replayGuard != null ? b.replayGuard : new MemoryReplayGuard(b.clock);
    this.resolver = Objects.requireNonNull(b.resolver, "resolver");
    this.transactionResolver = b.transactionResolver;
  }

  /**
   * A handler verifying with {@code secrets} (the app's signing secret; both during a rotation)
   * and answering with {@code resolver} for messages.
   */
  public static Builder builder(List<String> secrets, Resolver<CheckRequest> resolver) {
    return new Builder(secrets, resolver);
  }

  /** Answers one check-back call; header names in any case. */
  public CheckBackResponse handle(Map<String, List<String>> headers, byte[] body) {
    Verifier.Verified verified;
    try {
      verified = verifier.verify(headers, body);
    } catch (SignatureException e) {
      return problem(401, "Invalid signature", e.getMessage());
    }
    if (!replayGuard.firstUse(verified.webhookId(),
        verified.timestamp().plus(tolerance.multipliedBy(2)))) {
      return problem(409, "Replayed request",
          "webhook-id '" + verified.webhookId() + "' was already used");
    }
    JsonNode data = Json.tree(body).filter(JsonNode::isObject).orElse(null);
    if (data == null) {
      return problem(422, "Not a check-back request", "the body is not a JSON object");
    }
    if (data.has("transaction_id")) {
      List<String> missing = missing(data, "transaction_id", "app", "message_ids",
          "created_at", "check_count");
      return missing.isEmpty() ? answer(resolveTransaction(transactionRequest(data)))
          : notACheck(missing);
    }
    List<String> missing = missing(data, "message_id", "app", "topic", "created_at",
        "check_count");
    return missing.isEmpty() ? answer(resolveMessage(messageRequest(data))) : notACheck(missing);
  }

  /** {@link #handle(Map, byte[])} for headers with one value each. */
  public CheckBackResponse handleSingle(Map<String, String> headers, byte[] body) {
    Map<String, List<String>> multi = new LinkedHashMap<>();
    headers.forEach((name, value) -> multi.put(name, List.of(value)));
    return handle(multi, body);
  }

  private CheckStatus resolveMessage(CheckRequest check) {
    return answered(() -> resolver.resolve(check), "message " + check.messageId(),
        check.checkCount());
  }

  private CheckStatus resolveTransaction(TransactionCheckRequest check) {
    if (transactionResolver == null) {
      LOG.log(System.Logger.Level.WARNING, "check-back of transaction {0} answered unknown: "
          + "no transaction resolver", check.transactionId());
      return CheckStatus.UNKNOWN;
    }
    return answered(() -> transactionResolver.resolve(check),
        "transaction " + check.transactionId(), check.checkCount());
  }

  private interface Resolution {
    CheckStatus get() throws Exception;
  }

  private static CheckStatus answered(Resolution resolution, String subject, int attempt) {
    try {
      CheckStatus found = resolution.get();
      CheckStatus status = found == null ? CheckStatus.UNKNOWN : found;
      LOG.log(System.Logger.Level.INFO, "check-back {0} (attempt {1}) answered {2}", subject,
          attempt, status.wire());
      return status;
    } catch (Exception e) {
      LOG.log(System.Logger.Level.WARNING, "check-back resolver failed for " + subject
          + " (attempt " + attempt + "); answered unknown", e);
      return CheckStatus.UNKNOWN;
    }
  }

  private static CheckRequest messageRequest(JsonNode data) {
    Map<String, String> headers = new LinkedHashMap<>();
    data.path("headers").properties().forEach(e -> headers.put(e.getKey(),
        e.getValue().asText()));
    return new CheckRequest(data.get("message_id").asText(), data.get("app").asText(),
        data.get("topic").asText(), Json.text(data, "key"), Map.copyOf(headers),
        data.get("created_at").asText(), data.get("check_count").asInt());
  }

  private static TransactionCheckRequest transactionRequest(JsonNode data) {
    List<String> ids = new ArrayList<>();
    data.get("message_ids").forEach(id -> ids.add(id.asText()));
    return new TransactionCheckRequest(data.get("transaction_id").asText(),
        data.get("app").asText(), List.copyOf(ids), data.get("created_at").asText(),
        data.get("check_count").asInt());
  }

  private static List<String> missing(JsonNode data, String... fields) {
    List<String> missing = new ArrayList<>();
    for (String field : fields) {
      JsonNode value = data.get(field);
      boolean wrongType = value == null || value.isNull()
          || (field.equals("check_count") && !value.isIntegralNumber())
          || (field.equals("message_ids") && !value.isArray())
          || (!field.equals("check_count") && !field.equals("message_ids") && !value.isTextual());
      if (wrongType) {
        missing.add(field);
      }
    }
    return missing;
  }

  private static CheckBackResponse notACheck(List<String> fields) {
    return problem(422, "Not a check-back request",
        "missing or wrong-typed field(s): " + String.join(", ", fields));
  }

  private static CheckBackResponse answer(CheckStatus status) {
    return new CheckBackResponse(200, "application/json",
        Json.bytes(Map.of("status", status.wire())));
  }

  static CheckBackResponse problem(int status, String title, String detail) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("type", "about:blank");
    body.put("title", title);
    body.put("status", status);
    body.put("detail", detail);
    return new CheckBackResponse(status, "application/problem+json", Json.bytes(body));
  }

  /** Builds a {@link CheckBackHandler}. */
  public static final class Builder {
    private final List<String> secrets;
    private final Resolver<CheckRequest> resolver;
    private Resolver<TransactionCheckRequest> transactionResolver;
    private Duration tolerance = Verifier.DEFAULT_TOLERANCE;
    private ReplayGuard replayGuard;
    private Clock clock = Clock.systemUTC();

    private Builder(List<String> secrets, Resolver<CheckRequest> resolver) {
      this.secrets = List.copyOf(secrets);
      this.resolver = resolver;
    }

    /** Answers check-backs about transactions; without it they are answered unknown. */
    public Builder transactionResolver(Resolver<TransactionCheckRequest> resolver) {
      this.transactionResolver = resolver;
      return this;
    }

    /** How far a webhook-timestamp may be from now (default 5 minutes). */
    public Builder tolerance(Duration tolerance) {
      this.tolerance = tolerance;
      return this;
    }

    /** A shared guard for several replicas (default: in memory). */
    public Builder replayGuard(ReplayGuard guard) {
      this.replayGuard = guard;
      return this;
    }

    public Builder clock(Clock clock) {
      this.clock = clock;
      return this;
    }

    public CheckBackHandler build() {
      return new CheckBackHandler(this);
    }
  }
}
