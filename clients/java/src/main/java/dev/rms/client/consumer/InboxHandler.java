package dev.rms.client.consumer;

import java.sql.Connection;

/** The consumer's work for one message, on the inbox's connection and in its transaction. */
@FunctionalInterface
public interface InboxHandler {
  void handle(Connection conn, RmsRecord record) throws Exception;
}
