package dev.rms.client.producer;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/** A transaction of several messages as RMS reports it ({@link #raw()} has every field). */
public record TransactionInfo(
    String transactionId,
    String state,
    boolean dead,
    int checkCount,
    List<MessageInfo> messages,
    JsonNode raw) {

  public static TransactionInfo fromJson(JsonNode data) {
    List<MessageInfo> messages = new ArrayList<>();
    data.path("messages").forEach(m -> messages.add(MessageInfo.fromJson(m)));
    return new TransactionInfo(
        data.path("transaction_id").asText(),
        data.path("state").asText(),
        data.path("dead").asBoolean(false),
        data.path("check_count").asInt(0),
        List.copyOf(messages),
        data);
  }

  /** The ids of its messages, in the transaction's order. */
  public List<String> messageIds() {
    return messages.stream().map(MessageInfo::messageId).toList();
  }
}
