package dev.rms.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * RMS could not be reached, or stayed overloaded (408, 429, 502, 503, 504) through every retry. The
 * request may or may not have taken effect; repeating it with the same id is safe.
 */
public class RmsUnavailableException extends RmsException {
  private static final long serialVersionUID = 1L;

  public RmsUnavailableException(int status, String detail, JsonNode problem, Throwable cause) {
    super(status, detail, problem, cause);
  }
}
