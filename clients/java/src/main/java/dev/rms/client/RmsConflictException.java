package dev.rms.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Optional;

/**
 * 409: an illegal transition (for example a confirm of a {@code deleted} message: {@link
 * #currentState()} names the state), an id reused with other content, or a single confirm or
 * cancel of a message that belongs to a transaction ({@link #isPartOfTransaction()}, and {@link
 * #transactionId()} names the transaction to confirm or cancel instead).
 */
public class RmsConflictException extends RmsException {
  private static final long serialVersionUID = 1L;

  public RmsConflictException(String detail, JsonNode problem) {
    super(409, detail, problem);
  }

  /** The message's or transaction's state when RMS refused the transition. */
  public Optional<String> currentState() {
    return text("current_state");
  }

  /** The transaction the message belongs to (for {@code part-of-transaction}). */
  public Optional<String> transactionId() {
    return text("transaction_id");
  }

  /** True when the message must be confirmed or cancelled with its transaction. */
  public boolean isPartOfTransaction() {
    return type().endsWith("part-of-transaction");
  }

  private Optional<String> text(String field) {
    JsonNode value = problem().get(field);
    return value == null || value.isNull() ? Optional.empty() : Optional.of(value.asText());
  }
}
