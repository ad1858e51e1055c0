package dev.rms.client.producer;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rms.client.RetryPolicy;
import dev.rms.client.RmsException;
import dev.rms.client.RmsUnavailableException;
import dev.rms.client.internal.Ids;
import dev.rms.client.internal.RmsHttp;
import java.net.URI;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One app's producer client: prepare, confirm, cancel, one-shot send, batches and transactions
 * over RMS's HTTP API, retried safely with the same id (see {@link RetryPolicy}). Every call
 * passes on the caller's current OpenTelemetry trace context. Thread-safe; share one per app.
 *
 * <p>Errors are {@link RmsException}s: {@link dev.rms.client.RmsNotFoundException} (404), {@link
 * dev.rms.client.RmsConflictException} (409), {@link dev.rms.client.RmsValidationException}
 * (422), {@link RmsUnavailableException} (no answer, or overloaded through every retry).
 */
public final class RmsProducer {
  private static final System.Logger LOG = System.getLogger(RmsProducer.class.getName());

  private final RmsHttp http;
  private final String defaultCheckUrl;

  private RmsProducer(Builder b) {
    HttpClient client = b.httpClient != null ? b.httpClient : RmsHttp.defaultClient(b.timeout);
    this.http = new RmsHttp(b.baseUrl, b.apiKey, client, b.timeout, b.retry);
    this.defaultCheckUrl = b.defaultCheckUrl;
  }

  /** A producer for the app whose API key is {@code apiKey}, on RMS at {@code baseUrl}. */
  public static Builder builder(URI baseUrl, String apiKey) {
    return new Builder(baseUrl, apiKey);
  }

  /** Stores a pending-send message: not delivered until confirmed. */
  public MessageInfo prepare(Draft draft) {
    return message(http.post("/v1/messages", draft.body(draft.idOrNew(), defaultCheckUrl)));
  }

  /** One-shot prepare and confirm, for a message outside any local transaction. */
  public MessageInfo send(Draft draft) {
    return message(http.post("/v1/messages/send", draft.body(draft.idOrNew(), defaultCheckUrl)));
  }

  /** Marks the message sent and publishes it (idempotent; a done message stays done). */
  public MessageInfo confirm(String messageId) {
    return message(http.post(messagePath(messageId, "/confirm"), null));
  }

  /** Marks the message deleted: it is never delivered (idempotent). */
  public MessageInfo cancel(String messageId) {
    return message(http.post(messagePath(messageId, "/cancel"), null));
  }

  public MessageInfo get(String messageId) {
    return message(http.get(messagePath(messageId, "")));
  }

  /** Prepares many messages in one all-or-nothing request. */
  public List<MessageInfo> prepareBatch(List<Draft> drafts) {
    List<Map<String, Object>> items = new ArrayList<>();
    for (Draft draft : drafts) {
      items.add(draft.body(draft.idOrNew(), defaultCheckUrl));
    }
    return messages(http.post("/v1/messages/batch", Map.of("messages", items)));
  }

  /** Confirms many messages in one all-or-nothing request. */
  public List<MessageInfo> confirmBatch(List<String> messageIds) {
    return messages(http.post("/v1/messages/batch/confirm", Map.of("message_ids", messageIds)));
  }

  /** Cancels many messages in one all-or-nothing request. */
  public List<MessageInfo> cancelBatch(List<String> messageIds) {
    return messages(http.post("/v1/messages/batch/cancel", Map.of("message_ids", messageIds)));
  }

  /** Stores a pending transaction of several messages (published in order once confirmed). */
  public TransactionInfo prepareTransaction(TransactionDraft draft) {
    String id = draft.transactionId() != null ? draft.transactionId() : Ids.newId();
    return TransactionInfo.fromJson(http.post("/v1/transactions", draft.body(id,
        defaultCheckUrl)));
  }

  public TransactionInfo confirmTransaction(String transactionId) {
    return TransactionInfo.fromJson(http.post(transactionPath(transactionId, "/confirm"), null));
  }

  public TransactionInfo cancelTransaction(String transactionId) {
    return TransactionInfo.fromJson(http.post(transactionPath(transactionId, "/cancel"), null));
  }

  public TransactionInfo getTransaction(String transactionId) {
    return TransactionInfo.fromJson(http.get(transactionPath(transactionId, "")));
  }

  /**
   * Prepare, run {@code work} (the local transaction, committed inside it), then confirm; cancel
   * instead when {@code work} throws (and rethrow). When RMS cannot be reached for the confirm,
   * the local work stands and the check-back confirms later, so nothing is thrown; a confirm RMS
   * refuses (409: the check-back already rolled the message back) is thrown, since the local
   * commit and the message then disagree.
   */
  public <T, E extends Exception> T transactional(Draft draft,
      LocalTransaction<MessageInfo, T, E> work) throws E {
    MessageInfo prepared = prepare(draft);
    T result;
    try {
      result = work.run(prepared);
    } catch (Exception | Error failure) {
      quietly(() -> cancel(prepared.messageId()), prepared.messageId());
      throw failure;
    }
    confirmAfterCommit(() -> confirm(prepared.messageId()), prepared.messageId());
    return result;
  }

  /** {@link #transactional(Draft, LocalTransaction)} for a transaction of several messages. */
  public <T, E extends Exception> T transactional(TransactionDraft draft,
      LocalTransaction<TransactionInfo, T, E> work) throws E {
    TransactionInfo prepared = prepareTransaction(draft);
    String id = prepared.transactionId();
    T result;
    try {
      result = work.run(prepared);
    } catch (Exception | Error failure) {
      quietly(() -> cancelTransaction(id), id);
      throw failure;
    }
    confirmAfterCommit(() -> confirmTransaction(id), id);
    return result;
  }

  private static void quietly(Runnable cancel, String id) {
    try {
      cancel.run();
    } catch (RmsException e) { // the check-back asks later, and the barrier answers rolled_back
      LOG.log(System.Logger.Level.WARNING, "rms cancel of {0} failed: {1}", id, e.getMessage());
    }
  }

  private static void confirmAfterCommit(Runnable confirm, String id) {
    try {
      confirm.run();
    } catch (RmsUnavailableException e) {
      LOG.log(System.Logger.Level.WARNING,
          "rms confirm of {0} deferred to the check-back: {1}", id, e.getMessage());
    }
  }

  private static String messagePath(String id, String action) {
    return "/v1/messages/" + Ids.segment(id) + action;
  }

  private static String transactionPath(String id, String action) {
    return "/v1/transactions/" + Ids.segment(id) + action;
  }

  private static MessageInfo message(JsonNode data) {
    return MessageInfo.fromJson(data);
  }

  private static List<MessageInfo> messages(JsonNode data) {
    List<MessageInfo> found = new ArrayList<>();
    data.path("messages").forEach(m -> found.add(MessageInfo.fromJson(m)));
    return List.copyOf(found);
  }

  /** Builds an {@link RmsProducer}. */
  public static final class Builder {
    private final URI baseUrl;
    private final String apiKey;
    private HttpClient httpClient;
    private Duration timeout = Duration.ofSeconds(10);
    private RetryPolicy retry = RetryPolicy.DEFAULT;
    private String defaultCheckUrl;

    private Builder(URI baseUrl, String apiKey) {
      this.baseUrl = Objects.requireNonNull(baseUrl, "baseUrl");
      this.apiKey = Objects.requireNonNull(apiKey, "apiKey");
    }

    /** Your own client (HTTP/1.1 without redirects is what RMS expects). */
    public Builder httpClient(HttpClient client) {
      this.httpClient = client;
      return this;
    }

    /** Per attempt (and the connect timeout of the default client); default 10 s. */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    public Builder retry(RetryPolicy retry) {
      this.retry = retry;
      return this;
    }

    /** The check URL of drafts and transactions that name none. */
    public Builder defaultCheckUrl(String url) {
      this.defaultCheckUrl = url;
      return this;
    }

    public RmsProducer build() {
      return new RmsProducer(this);
    }
  }
}
