package dev.rms.client.producer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Several messages, possibly on different topics, delivered all or none, in their listed order,
 * and checked back once as a whole ({@code /v1/transactions}). Without a {@code transactionId}
 * the producer picks one before the first attempt.
 */
public final class TransactionDraft {
  private final List<Draft> messages;
  private final String transactionId;
  private final String checkUrl;
  private final Duration checkAfter;
  private final Integer maxChecks;

  private TransactionDraft(Builder b) {
    if (b.messages.isEmpty()) {
      throw new IllegalArgumentException("a transaction needs at least one message");
    }
    this.messages = List.copyOf(b.messages);
    this.transactionId = b.transactionId;
    this.checkUrl = b.checkUrl;
    this.checkAfter = b.checkAfter;
    this.maxChecks = b.maxChecks;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A transaction of {@code drafts} with no setting of its own. */
  public static TransactionDraft of(List<Draft> drafts) {
    return builder().messages(drafts).build();
  }

  public String transactionId() {
    return transactionId;
  }

  Map<String, Object> body(String id, String defaultCheckUrl) {
    List<Map<String, Object>> items = new ArrayList<>();
    for (Draft draft : messages) {
      items.add(draft.memberBody(draft.idOrNew()));
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("transaction_id", id);
    body.put("messages", items);
    Draft.putCheckBack(body, checkUrl, checkAfter, maxChecks, defaultCheckUrl);
    return body;
  }

  /** Builds a {@link TransactionDraft}: at least one message. */
  public static final class Builder {
    private final List<Draft> messages = new ArrayList<>();
    private String transactionId;
    private String checkUrl;
    private Duration checkAfter;
    private Integer maxChecks;

    private Builder() {}

    public Builder message(Draft draft) {
      messages.add(draft);
      return this;
    }

    public Builder messages(List<Draft> drafts) {
      messages.addAll(drafts);
      return this;
    }

    public Builder transactionId(String transactionId) {
      this.transactionId = transactionId;
      return this;
    }

    public Builder checkUrl(String checkUrl) {
      this.checkUrl = checkUrl;
      return this;
    }

    public Builder checkAfter(Duration checkAfter) {
      this.checkAfter = checkAfter;
      return this;
    }

    public Builder maxChecks(int maxChecks) {
      this.maxChecks = maxChecks;
      return this;
    }

    public TransactionDraft build() {
      return new TransactionDraft(this);
    }
  }
}
