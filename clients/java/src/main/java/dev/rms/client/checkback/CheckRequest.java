package dev.rms.client.checkback;

import java.util.Map;

/** What RMS asks about a pending-send message (its check-back body). */
public record CheckRequest(
    String messageId,
    String app,
    String topic,
    String key,
    Map<String, String> headers,
    String createdAt,
    int checkCount) {}
