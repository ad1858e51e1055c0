/**
 * Typed errors of the RMS client. Every error RMS answers is an RFC 9457 problem document
 * (design section 4); the error classes carry it whole in `problem` and its common fields as
 * properties.
 */

/** An RFC 9457 problem document as RMS writes it; extension members are kept as they came. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  /** 422: one entry per invalid field. */
  errors?: Array<{ loc: Array<string | number>; msg: string; type?: string }>;
  /** 409: the state that made the transition illegal. */
  current_state?: string;
  /** 409 `part-of-transaction`: the transaction the message belongs to. */
  transaction_id?: string;
  /** 429 / 503: seconds to wait. */
  retry_after?: number;
  [extension: string]: unknown;
}

/** RMS refused the request, or could not be reached; `status` is null without an answer. */
export class RmsError extends Error {
  readonly status: number | null;
  readonly detail: string;
  readonly problem: Problem;

  constructor(status: number | null, detail: string, problem: Problem = {}, options?: ErrorOptions) {
    super(`${status ?? "no answer"}: ${detail}`, options);
    this.name = new.target.name;
    this.status = status;
    this.detail = detail;
    this.problem = problem;
  }
}

/** 404: the message or transaction is unknown, or belongs to another app. */
export class RmsNotFoundError extends RmsError {}

/**
 * 409: an illegal transition (e.g. cancelling a `sent` message; `currentState` names the
 * state), an id reused with other content, or a single confirm or cancel of a message that
 * belongs to a transaction (`partOfTransaction`, with `transactionId`).
 */
export class RmsConflictError extends RmsError {
  get currentState(): string | null {
    return this.problem.current_state ?? null;
  }

  get transactionId(): string | null {
    return this.problem.transaction_id ?? null;
  }

  get partOfTransaction(): boolean {
    return (this.problem.type ?? "").endsWith("part-of-transaction");
  }
}

/** 422: the request is invalid; `problem.errors` lists the fields and why. */
export class RmsValidationError extends RmsError {
  get errors(): NonNullable<Problem["errors"]> {
    return this.problem.errors ?? [];
  }
}

/** RMS could not be reached, or stayed overloaded (408, 429, 502, 503, 504) through every retry. */
export class RmsUnavailableError extends RmsError {}

/** The error class for an answer with this status. */
export function errorFor(status: number, detail: string, problem: Problem): RmsError {
  if (status === 404) return new RmsNotFoundError(status, detail, problem);
  if (status === 409) return new RmsConflictError(status, detail, problem);
  if (status === 422) return new RmsValidationError(status, detail, problem);
  if (status === 429 || status >= 500) return new RmsUnavailableError(status, detail, problem);
  return new RmsError(status, detail, problem);
}
