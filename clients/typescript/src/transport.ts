/**
 * One logical HTTP call to RMS over Node's fetch, retried safely: every RMS call is
 * idempotent by id (the client fixes ids before the first attempt), so repeating one whose
 * answer was lost is harmless.
 *
 * - 408, 429, 502, 503 and 504 are retried with capped, jittered exponential backoff, or after the
 *   answer's `Retry-After` (seconds or an HTTP date; capped too).
 * - A connection closed before any byte of the answer (typically a keep-alive connection the
 *   server closed as the request went out) is retried once at once; later network errors back
 *   off like an overloaded answer.
 * - Anything else is returned, or raised as a typed error.
 */
import { setTimeout as sleep } from "node:timers/promises";

import { errorFor, RmsUnavailableError, type Problem } from "./errors.js";
import { traceHeaders } from "./trace.js";
import { USER_AGENT } from "./version.js";

export interface RetryOptions {
  /** Attempts per call, the first included (default 4). */
  attempts?: number;
  /** First backoff in milliseconds, doubled per attempt (default 200). */
  backoffMs?: number;
  /** Cap of every wait, `Retry-After` included, in milliseconds (default 5000). */
  maxBackoffMs?: number;
}

export const RETRY_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

const CLOSED_CODES: ReadonlySet<string> = new Set([
  "UND_ERR_SOCKET", "UND_ERR_CLOSED", "ECONNRESET", "EPIPE",
]);

export class RetryPolicy {
  readonly attempts: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;

  constructor(options: RetryOptions = {}) {
    this.attempts = Math.max(1, options.attempts ?? 4);
    this.backoffMs = options.backoffMs ?? 200;
    this.maxBackoffMs = options.maxBackoffMs ?? 5000;
  }

  /** Milliseconds before the attempt after `attempt` (1-based): the `Retry-After` when given,
   * else doubling with jitter; always capped. */
  delayMs(attempt: number, retryAfter: string | null = null, random: () => number = Math.random): number {
    const asked = parseRetryAfter(retryAfter);
    if (asked !== null) return Math.min(asked, this.maxBackoffMs);
    const base = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (attempt - 1));
    return base * (0.5 + random() / 2);
  }
}

/** Milliseconds a `Retry-After` value asks for (delta-seconds or an HTTP date), or null when
 * absent or unreadable. A date in the past is 0. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** True when `error` (a rejected fetch) means the connection closed before any answer came. */
export function isConnectionClosed(error: unknown): boolean {
  for (let cause: unknown = error, depth = 0; cause && depth < 4; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && CLOSED_CODES.has(code)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
  retry?: RetryOptions;
  /** The fetch to use (default: Node's global fetch). */
  fetch?: typeof fetch;
}

export class Transport {
  readonly baseUrl: string;
  private readonly auth: string;
  private readonly timeoutMs: number;
  private readonly retry: RetryPolicy;
  private readonly fetchImpl: typeof fetch;

  constructor(options: TransportOptions) {
    if (!options.baseUrl) throw new TypeError("the RMS base URL is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.auth = `Bearer ${options.apiKey}`;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retry = new RetryPolicy(options.retry);
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  /** The answer's JSON object; a typed {@link RmsError} for any refusal. */
  async call<T>(method: "GET" | "POST", path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let closedRetried = false;
    for (let attempt = 1; ; attempt += 1) {
      let answer: Answer;
      try {
        answer = await this.attempt(method, path, payload, extraHeaders);
      } catch (error) {
        if (!closedRetried && !(error instanceof AnswerCutOff) && isConnectionClosed(error)) {
          closedRetried = true;
          attempt -= 1; // a connection that was already closed is not an attempt
          continue;
        }
        if (attempt >= this.retry.attempts) {
          throw new RmsUnavailableError(null, describe(error), {}, { cause: error });
        }
        await sleep(this.retry.delayMs(attempt));
        continue;
      }
      if (RETRY_STATUSES.has(answer.status) && attempt < this.retry.attempts) {
        await sleep(this.retry.delayMs(attempt, answer.retryAfter));
        continue;
      }
      return result(answer) as T;
    }
  }

  /** One request and its whole answer; rejects when either fails on the way. */
  private async attempt(method: string, path: string, payload: string | undefined,
                        extraHeaders: Record<string, string>): Promise<Answer> {
    const response = await this.fetchImpl(this.baseUrl + path, {
      method,
      headers: { ...this.headers(payload !== undefined), ...extraHeaders },
      body: payload,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      throw new AnswerCutOff(`the answer (${response.status}) was cut off`, { cause: error });
    }
    return { status: response.status, statusText: response.statusText, ok: response.ok,
             retryAfter: response.headers.get("retry-after"), text };
  }

  private headers(json: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      authorization: this.auth, accept: "application/json", "user-agent": USER_AGENT,
    };
    if (json) headers["content-type"] = "application/json";
    return { ...headers, ...traceHeaders() };
  }
}

/** The answer's head came, its body did not: retried with backoff like other network errors. */
class AnswerCutOff extends Error {}

interface Answer {
  status: number;
  statusText: string;
  ok: boolean;
  retryAfter: string | null;
  text: string;
}

function result(answer: Answer): Record<string, unknown> {
  let data: unknown = undefined;
  try {
    data = answer.text ? JSON.parse(answer.text) : undefined;
  } catch {
    data = undefined;
  }
  const object = typeof data === "object" && data !== null && !Array.isArray(data)
    ? (data as Record<string, unknown>) : undefined;
  if (answer.ok && object !== undefined) return object;
  const problem: Problem = object ?? {};
  const detail = typeof problem.detail === "string" && problem.detail
    ? problem.detail : answer.statusText || "unexpected answer";
  throw errorFor(answer.status, detail, problem);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name}: ${error.message}${cause}`;
}
