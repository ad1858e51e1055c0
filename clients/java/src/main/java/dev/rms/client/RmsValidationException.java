package dev.rms.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * 422: the request is not valid (a missing or wrong-typed field, an invalid id, a check URL
 * outside the app's prefixes, ...). {@link #problem()} is the whole problem document and {@link
 * #errors()} its per-field {@code errors}.
 */
public class RmsValidationException extends RmsException {
  private static final long serialVersionUID = 1L;

  public RmsValidationException(String detail, JsonNode problem) {
    super(422, detail, problem);
  }

  /** The problem document's {@code errors} (each {@code loc}, {@code msg}, {@code type}). */
  public List<JsonNode> errors() {
    List<JsonNode> found = new ArrayList<>();
    problem().path("errors").forEach(found::add);
    return found;
  }
}
