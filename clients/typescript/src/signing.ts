/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com) with the official
 * `standardwebhooks` package: RMS signs each check-back call with the app's signing secret
 * (design section 5), and a consumer signs each ack record it writes to the ack topic
 * (section 6). Secrets are `whsec_<base64>` as RMS shows them.
 */
import { randomUUID } from "node:crypto";

import { Webhook, WebhookVerificationError } from "standardwebhooks";

export const HEADER_ID = "webhook-id";
export const HEADER_TIMESTAMP = "webhook-timestamp";
export const HEADER_SIGNATURE = "webhook-signature";
/** The Standard Webhooks tolerance, and the widest the `standardwebhooks` package accepts. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** The request is not provably from RMS: missing headers, no matching signature, or a
 * timestamp outside the tolerance. */
export class SignatureError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "SignatureError";
  }
}

/** What a verified request proved: its id (for replay checks) and when it was signed. */
export interface Verified {
  webhookId: string;
  timestamp: number;
}

export type HeaderBag = Record<string, string | string[] | undefined> | Headers;

/** Header names lower-cased, repeated values joined (a signature header may be repeated). */
export function lowerHeaders(headers: HeaderBag): Record<string, string> {
  const entries: Array<[string, string]> = headers instanceof Headers
    ? [...headers.entries()]
    : Object.entries(headers).flatMap(([name, value]): Array<[string, string]> =>
      value === undefined ? [] : [[name, Array.isArray(value) ? value.join(" ") : value]]);
  const lowered: Record<string, string> = {};
  for (const [name, value] of entries) {
    const key = name.toLowerCase();
    lowered[key] = key in lowered ? `${lowered[key]} ${value}` : value;
  }
  return lowered;
}

function webhook(secret: string): Webhook {
  try {
    return new Webhook(secret);
  } catch (error) {
    throw new TypeError("a signing secret is 'whsec_' followed by base64", { cause: error });
  }
}

/**
 * Checks Standard Webhooks headers against any of several secrets (during a rotation
 * overlap, the old and the new) within a timestamp tolerance. Replays inside the tolerance
 * are the caller's concern ({@link ReplayGuard}), since remembering ids needs storage.
 */
export class Verifier {
  private readonly webhooks: Webhook[];
  readonly toleranceSeconds: number;

  constructor(secrets: string[], toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS) {
    if (secrets.length === 0) throw new TypeError("at least one signing secret is needed");
    if (!(toleranceSeconds > 0 && toleranceSeconds <= DEFAULT_TOLERANCE_SECONDS)) {
      throw new RangeError(`the timestamp tolerance must be within (0, ${DEFAULT_TOLERANCE_SECONDS}] seconds`);
    }
    this.webhooks = secrets.map(webhook);
    this.toleranceSeconds = toleranceSeconds;
  }

  /** Throws {@link SignatureError} unless `body` carries a valid, fresh signature. */
  verify(headers: HeaderBag, body: string | Buffer): Verified {
    const lowered = lowerHeaders(headers);
    const missing = [HEADER_ID, HEADER_TIMESTAMP, HEADER_SIGNATURE].filter((name) => !lowered[name]);
    if (missing.length > 0) throw new SignatureError(`missing header(s): ${missing.join(", ")}`);
    const stamp = lowered[HEADER_TIMESTAMP] as string;
    if (!/^\d+$/.test(stamp)) throw new SignatureError(`webhook-timestamp ${JSON.stringify(stamp)} is not unix seconds`);
    const timestamp = Number(stamp);
    if (Math.abs(Date.now() / 1000 - timestamp) > this.toleranceSeconds) {
      throw new SignatureError(`webhook-timestamp ${timestamp} is outside the ${this.toleranceSeconds}s tolerance`);
    }
    const text = typeof body === "string" ? body : body.toString("utf8");
    for (const hook of this.webhooks) {
      try {
        hook.verify(text, lowered, { jsonParse: false });
        return { webhookId: lowered[HEADER_ID] as string, timestamp };
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) throw error;
      }
    }
    throw new SignatureError("no webhook-signature matches a known signing secret");
  }
}

/** The three Standard Webhooks headers for `body`, signed with every secret given (current
 * first). */
export function signedHeaders(secrets: string[], body: string, webhookId: string = `ack_${randomUUID().replaceAll("-", "")}`,
                              timestampSeconds: number = Math.floor(Date.now() / 1000)): Record<string, string> {
  if (secrets.length === 0) throw new TypeError("at least one signing secret is needed");
  const at = new Date(timestampSeconds * 1000);
  const signature = secrets.map((secret) => webhook(secret).sign(webhookId, at, body)).join(" ");
  return { [HEADER_ID]: webhookId, [HEADER_TIMESTAMP]: String(timestampSeconds), [HEADER_SIGNATURE]: signature };
}
