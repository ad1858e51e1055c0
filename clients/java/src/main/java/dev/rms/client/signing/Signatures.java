package dev.rms.client.signing;

import com.standardwebhooks.Webhook;
import com.standardwebhooks.exceptions.WebhookSigningException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com) with the official library:
 * {@code v1,<base64 HMAC-SHA256 of "id.timestamp.body">} keyed with an app's {@code whsec_}
 * signing secret. RMS signs its check-back calls this way, and a consumer signs its ack records.
 */
public final class Signatures {
  public static final String HEADER_ID = "webhook-id";
  public static final String HEADER_TIMESTAMP = "webhook-timestamp";
  public static final String HEADER_SIGNATURE = "webhook-signature";

  private Signatures() {}

  /** The official library's signer for a {@code whsec_<base64>} secret. */
  public static Webhook webhook(String secret) {
    try {
      return new Webhook(secret);
    } catch (IllegalArgumentException | com.standardwebhooks.exceptions
        .EmptyWebhookSecretException e) {
      throw new IllegalArgumentException("a signing secret is 'whsec_' followed by base64", e);
    }
  }

  /** One {@code v1,<signature>} entry for {@code body}. */
  public static String sign(Webhook webhook, String id, long timestamp, byte[] body) {
    try {
      return webhook.sign(id, timestamp, new String(body, StandardCharsets.UTF_8));
    } catch (WebhookSigningException e) {
      throw new IllegalStateException("HMAC-SHA256 is unavailable: " + e.getMessage(), e);
    }
  }

  /**
   * The three Standard Webhooks headers for {@code body}, signed with every secret given
   * (current first), so a receiver that knows either side of a rotation accepts it.
   */
  public static Map<String, String> signedHeaders(List<String> secrets, String id,
      long timestamp, byte[] body) {
    if (secrets.isEmpty()) {
      throw new IllegalArgumentException("at least one signing secret is needed");
    }
    StringBuilder signatures = new StringBuilder();
    for (String secret : secrets) {
      signatures.append(signatures.length() == 0 ? "" : " ")
          .append(sign(webhook(secret), id, timestamp, body));
    }
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put(HEADER_ID, id);
    headers.put(HEADER_TIMESTAMP, Long.toString(timestamp));
    headers.put(HEADER_SIGNATURE, signatures.toString());
    return headers;
  }
}
