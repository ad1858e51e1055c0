package dev.rms.client.checkback;

import java.util.List;

/** What RMS asks about a pending transaction of several messages: one call for all of them. */
public record TransactionCheckRequest(
    String transactionId,
    String app,
    List<String> messageIds,
    String createdAt,
    int checkCount) {}
