/**
 * The producer's check-back endpoint (design section 5) as a framework-neutral function:
 * (headers, raw body) → {status, headers, body}.
 *
 * RMS calls `POST <check_url>` when a message, or a transaction of several messages, stayed
 * pending. The handler proves the call is RMS's (Standard Webhooks signature over the raw
 * body, timestamp within the tolerance, each `webhook-id` used once), hands it to the
 * application's resolver and answers `{"status": "committed" | "rolled_back" | "unknown"}`.
 * A resolver that throws answers `unknown` (RMS asks again later), never an error page. The
 * resolver runs in the call's W3C trace context (`traceparent`), so its spans join the trace.
 *
 * Refusals are problem documents: 401 signature missing, wrong or stale; 409 `webhook-id`
 * already used (a replay); 422 a body that is not a check-back request.
 */
import { context } from "@opentelemetry/api";

import { DEFAULT_TOLERANCE_SECONDS, lowerHeaders, SignatureError, Verifier, type HeaderBag } from "./signing.js";
import { contextFromHeaders } from "./trace.js";

export type CheckStatus = "committed" | "rolled_back" | "unknown";
export const CHECK_STATUSES: readonly CheckStatus[] = ["committed", "rolled_back", "unknown"];

/** What RMS asks about one message. Unknown fields are kept: the contract may add some. */
export interface CheckRequest {
  message_id: string;
  app: string;
  topic: string;
  key: string | null;
  headers: Record<string, string>;
  created_at: string;
  check_count: number;
  [field: string]: unknown;
}

/** What RMS asks about a transaction of several messages (one call for all of them). */
export interface TransactionCheckRequest {
  transaction_id: string;
  app: string;
  message_ids: string[];
  created_at: string;
  check_count: number;
  [field: string]: unknown;
}

export type Resolver = (check: CheckRequest) => Promise<CheckStatus> | CheckStatus;
export type TransactionResolver = (check: TransactionCheckRequest) => Promise<CheckStatus> | CheckStatus;

/** The answer to write: status code, headers and body. */
export interface CheckBackAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export type CheckBackHandler = (headers: HeaderBag, body: string | Buffer) => Promise<CheckBackAnswer>;

/** Remembers used `webhook-id`s. Several replicas behind a load balancer need a shared one
 * (for example a table with a unique id, or Redis `SET NX EX`). */
export interface ReplayGuard {
  /** True the first time `webhookId` is seen; remember it until `rememberUntilMs` (epoch ms). */
  firstUse(webhookId: string, rememberUntilMs: number): Promise<boolean> | boolean;
}

/** The ids seen within the tolerance window, in this process. An id older than the window is
 * refused by its timestamp anyway, so forgetting it then is safe. */
export class MemoryReplayGuard implements ReplayGuard {
  private seen = new Map<string, number>();
  private nextPrune = 0;

  firstUse(webhookId: string, rememberUntilMs: number): boolean {
    const now = Date.now();
    if (now >= this.nextPrune) {
      for (const [id, until] of this.seen) if (until <= now) this.seen.delete(id);
      this.nextPrune = now + 10_000;
    }
    if (this.seen.has(webhookId)) return false;
    this.seen.set(webhookId, rememberUntilMs);
    return true;
  }
}

export interface CheckBackOptions {
  /** The app's signing secrets (`whsec_...`); during a rotation, both. */
  secrets: string[];
  /** Answers for a message. */
  resolve: Resolver;
  /** Answers for a transaction of several messages; without it such a call answers `unknown`. */
  resolveTransaction?: TransactionResolver;
  /** At most 300 (the default). */
  toleranceSeconds?: number;
  replayGuard?: ReplayGuard;
  /** Told when a resolver throws (the call then answers `unknown`). */
  onResolverError?: (error: unknown, check: CheckRequest | TransactionCheckRequest) => void;
}

export function createCheckBackHandler(options: CheckBackOptions): CheckBackHandler {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const verifier = new Verifier(options.secrets, tolerance);
  const guard = options.replayGuard ?? new MemoryReplayGuard();
  return async (headers, body) => {
    let webhookId: string;
    let timestamp: number;
    try {
      ({ webhookId, timestamp } = verifier.verify(headers, body));
    } catch (error) {
      if (error instanceof SignatureError) return problemAnswer(401, "Invalid signature", error.message);
      throw error;
    }
    if (!(await guard.firstUse(webhookId, (timestamp + 2 * tolerance) * 1000))) {
      return problemAnswer(409, "Replayed request", `webhook-id ${JSON.stringify(webhookId)} was already used`);
    }
    const parsed = parseCheck(typeof body === "string" ? body : body.toString("utf8"));
    if (typeof parsed === "string") return problemAnswer(422, "Not a check-back request", parsed);
    // the resolver runs in the call's trace context (RMS's traceparent, not signed)
    const status = await context.with(contextFromHeaders(lowerHeaders(headers)), () => answer(options, parsed));
    return { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ status }) };
  };
}

async function answer(options: CheckBackOptions, check: CheckRequest | TransactionCheckRequest): Promise<CheckStatus> {
  try {
    const status = "transaction_id" in check
      ? await (options.resolveTransaction?.(check as TransactionCheckRequest) ?? "unknown")
      : await options.resolve(check as CheckRequest);
    if (!CHECK_STATUSES.includes(status)) throw new TypeError(`a resolver answered ${JSON.stringify(status)}`);
    return status;
  } catch (error) {
    options.onResolverError?.(error, check);
    return "unknown";
  }
}

const MESSAGE_FIELDS = { message_id: "string", app: "string", topic: "string", created_at: "string" } as const;
const TRANSACTION_FIELDS = { transaction_id: "string", app: "string", created_at: "string" } as const;

/** The request, or why the body is not one. */
export function parseCheck(text: string): CheckRequest | TransactionCheckRequest | string {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return "body: not JSON";
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) return "body: not a JSON object";
  const body = data as Record<string, unknown>;
  const transaction = "transaction_id" in body;
  const wrong = Object.entries(transaction ? TRANSACTION_FIELDS : MESSAGE_FIELDS)
    .filter(([name, kind]) => typeof body[name] !== kind).map(([name]) => name);
  if (!Number.isInteger(body.check_count)) wrong.push("check_count");
  if (transaction && !(Array.isArray(body.message_ids) && body.message_ids.every((id) => typeof id === "string"))) {
    wrong.push("message_ids");
  }
  if (!transaction) {
    if (body.key !== undefined && body.key !== null && typeof body.key !== "string") wrong.push("key");
    if (body.headers !== undefined && (typeof body.headers !== "object" || body.headers === null)) wrong.push("headers");
  }
  if (wrong.length > 0) return `missing or wrong-typed field(s): ${wrong.join(", ")}`;
  if (transaction) return body as TransactionCheckRequest;
  return { key: null, headers: {}, ...body } as CheckRequest;
}

/** An RFC 9457 problem document as a check-back answer. */
export function problemAnswer(status: number, title: string, detail: string): CheckBackAnswer {
  return {
    status,
    headers: { "content-type": "application/problem+json" },
    body: JSON.stringify({ type: "about:blank", title, status, detail }),
  };
}
