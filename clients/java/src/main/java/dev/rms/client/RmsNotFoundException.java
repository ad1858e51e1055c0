package dev.rms.client;

import com.fasterxml.jackson.databind.JsonNode;

/** 404: the message or transaction is unknown, or belongs to another app. */
public class RmsNotFoundException extends RmsException {
  private static final long serialVersionUID = 1L;

  public RmsNotFoundException(String detail, JsonNode problem) {
    super(404, detail, problem);
  }
}
