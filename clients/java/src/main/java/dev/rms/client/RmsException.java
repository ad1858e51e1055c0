package dev.rms.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.OptionalInt;

/**
 * RMS refused a request, or could not be reached. {@link #status()} is the HTTP status (empty
 * when no answer came) and {@link #problem()} the RFC 9457 problem document RMS answered with
 * (an empty object when there was none).
 */
public class RmsException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final String detail;
  private final transient JsonNode problem;

  public RmsException(int status, String detail, JsonNode problem) {
    this(status, detail, problem, null);
  }

  public RmsException(int status, String detail, JsonNode problem, Throwable cause) {
    super((status > 0 ? status : "no answer") + ": " + detail, cause);
    this.status = status;
    this.detail = detail;
    this.problem = problem == null ? JsonNodeFactory.instance.objectNode() : problem;
  }

  /** The HTTP status, or empty when RMS gave no answer. */
  public OptionalInt status() {
    return status > 0 ? OptionalInt.of(status) : OptionalInt.empty();
  }

  /** The problem document's {@code detail}, or what went wrong on the way. */
  public String detail() {
    return detail;
  }

  /** The problem document as RMS sent it ({@code type}, {@code title}, {@code status}, ...). */
  public JsonNode problem() {
    return problem;
  }

  /** The problem document's {@code type}, or an empty string. */
  public String type() {
    return problem.path("type").asText("");
  }
}
