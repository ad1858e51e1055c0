/**
 * The producer: prepare, confirm, cancel, one-shot send, batches and transactions of several
 * messages over RMS's HTTP API (design section 4), every call retried safely (see
 * {@link Transport}). Ids are fixed before the first attempt, so a prepare whose answer was
 * lost is repeated under the same id and RMS answers with the stored message.
 *
 * Options are camelCase; the objects RMS answers ({@link Message}, {@link Transaction}) keep
 * the contract's field names.
 */
import { RmsUnavailableError } from "./errors.js";
import { newMessageId } from "./ids.js";
import { Transport, type TransportOptions } from "./transport.js";

export type MessageState = "pending-send" | "sent" | "done" | "deleted";
export type TransactionState = "pending" | "confirmed" | "cancelled";

/** A message as RMS reports it (design section 4, "The message object"). */
export interface Message {
  message_id: string;
  app: string;
  topic: string;
  key: string | null;
  payload: unknown;
  headers: Record<string, string>;
  state: MessageState;
  dead: boolean;
  dead_reason: string | null;
  check_count: number;
  delivery_count: number;
  created_at: string;
  confirmed_at: string | null;
  done_at: string | null;
  deleted_at: string | null;
  next_check_at: string | null;
  next_delivery_at: string | null;
  traceparent: string | null;
  tracestate: string | null;
  ordered: boolean;
  deliver_after: string | null;
  [field: string]: unknown;
}

/** A transaction of several messages as RMS reports it. */
export interface Transaction {
  transaction_id: string;
  app: string;
  state: TransactionState;
  dead: boolean;
  dead_reason: string | null;
  check_count: number;
  check_url: string;
  max_checks: number;
  created_at: string;
  confirmed_at: string | null;
  cancelled_at: string | null;
  next_check_at: string | null;
  messages: Message[];
  [field: string]: unknown;
}

/** A message of a transaction: its check-back fields belong to the transaction. */
export interface MemberDraft {
  topic: string;
  payload: unknown;
  /** Default: a new time-ordered id, fixed before the first attempt. */
  messageId?: string;
  /** The partition key (and the ordering key on an ordered topic). */
  key?: string;
  headers?: Record<string, string>;
  ackTimeoutSeconds?: number;
  maxDeliveries?: number;
}

/** A message to prepare or send. */
export interface MessageDraft extends MemberDraft {
  /** Where RMS asks about the local transaction (default: the producer's `checkUrl`). */
  checkUrl?: string;
  checkAfterSeconds?: number;
  maxChecks?: number;
  /** Delayed delivery: not published before this time (at most one of the two). */
  deliverAfter?: Date | string;
  /** Delayed delivery: seconds after the prepare, on RMS's clock. */
  delaySeconds?: number;
}

export interface TransactionOptions {
  /** Default: a new time-ordered id, fixed before the first attempt. */
  transactionId?: string;
  checkUrl?: string;
  checkAfterSeconds?: number;
  maxChecks?: number;
}

export interface ProducerOptions extends TransportOptions {
  /** The check-back URL of messages and transactions that name none. */
  checkUrl?: string;
}

export class RmsProducer {
  private readonly http: Transport;
  readonly checkUrl: string | undefined;

  constructor(options: ProducerOptions) {
    this.http = new Transport(options);
    this.checkUrl = options.checkUrl;
  }

  /** Store a `pending-send` message: not delivered until confirmed. */
  prepare(draft: MessageDraft): Promise<Message> {
    return this.http.call("POST", "/v1/messages", this.body(draft));
  }

  /** One-shot prepare and confirm, for a message outside any local transaction. */
  send(draft: MessageDraft): Promise<Message> {
    return this.http.call("POST", "/v1/messages/send", this.body(draft));
  }

  confirm(messageId: string): Promise<Message> {
    return this.http.call("POST", `/v1/messages/${encodeURIComponent(messageId)}/confirm`);
  }

  cancel(messageId: string): Promise<Message> {
    return this.http.call("POST", `/v1/messages/${encodeURIComponent(messageId)}/cancel`);
  }

  get(messageId: string): Promise<Message> {
    return this.http.call("GET", `/v1/messages/${encodeURIComponent(messageId)}`);
  }

  /** Prepare many messages in one all-or-nothing request. */
  async prepareBatch(drafts: MessageDraft[]): Promise<Message[]> {
    const body = { messages: drafts.map((draft) => this.body(draft)) };
    return (await this.http.call<{ messages: Message[] }>("POST", "/v1/messages/batch", body)).messages;
  }

  async confirmBatch(messageIds: string[]): Promise<Message[]> {
    const body = { message_ids: messageIds };
    return (await this.http.call<{ messages: Message[] }>("POST", "/v1/messages/batch/confirm", body)).messages;
  }

  async cancelBatch(messageIds: string[]): Promise<Message[]> {
    const body = { message_ids: messageIds };
    return (await this.http.call<{ messages: Message[] }>("POST", "/v1/messages/batch/cancel", body)).messages;
  }

  /** Store a `pending` transaction: its messages are published in this order once confirmed,
   * none of them if cancelled; RMS asks the transaction's check-back once for all of them. */
  prepareTransaction(drafts: MemberDraft[], options: TransactionOptions = {}): Promise<Transaction> {
    const body = compact({
      transaction_id: options.transactionId ?? newMessageId(),
      messages: drafts.map(itemBody),
      ...this.checkBackFields(options),
    });
    return this.http.call("POST", "/v1/transactions", body);
  }

  confirmTransaction(transactionId: string): Promise<Transaction> {
    return this.http.call("POST", `/v1/transactions/${encodeURIComponent(transactionId)}/confirm`);
  }

  cancelTransaction(transactionId: string): Promise<Transaction> {
    return this.http.call("POST", `/v1/transactions/${encodeURIComponent(transactionId)}/cancel`);
  }

  getTransaction(transactionId: string): Promise<Transaction> {
    return this.http.call("GET", `/v1/transactions/${encodeURIComponent(transactionId)}`);
  }

  /**
   * Prepare, run `work` (the local transaction, committed inside it), then confirm; cancel
   * instead when `work` throws (and rethrow). When RMS cannot be reached for the confirm,
   * the local work stands and the check-back confirms the message later, so nothing is
   * thrown; a confirm RMS refuses (409: the check-back already rolled it back) is thrown.
   */
  async transactional<T>(draft: MessageDraft, work: (message: Message) => Promise<T>): Promise<T> {
    const message = await this.prepare(draft);
    return this.around(message, work, (id) => this.confirm(id), (id) => this.cancel(id), message.message_id);
  }

  /** {@link transactional} for a transaction of several messages. */
  async transaction<T>(drafts: MemberDraft[], options: TransactionOptions,
                       work: (transaction: Transaction) => Promise<T>): Promise<T> {
    const prepared = await this.prepareTransaction(drafts, options);
    return this.around(prepared, work, (id) => this.confirmTransaction(id),
                       (id) => this.cancelTransaction(id), prepared.transaction_id);
  }

  private async around<P, T>(prepared: P, work: (prepared: P) => Promise<T>,
                             confirm: (id: string) => Promise<unknown>,
                             cancel: (id: string) => Promise<unknown>, id: string): Promise<T> {
    let result: T;
    try {
      result = await work(prepared);
    } catch (error) {
      // a failed cancel is harmless: the check-back asks, and the barrier answers rolled_back
      await cancel(id).catch(() => undefined);
      throw error;
    }
    try {
      await confirm(id);
    } catch (error) {
      if (!(error instanceof RmsUnavailableError)) throw error; // the check-back confirms it
    }
    return result;
  }

  /** The check-back fields of a message or a transaction, with the producer's `checkUrl` when
   * it names none. */
  private checkBackFields(
    settings: Pick<MessageDraft, "checkUrl" | "checkAfterSeconds" | "maxChecks">,
  ): Record<string, unknown> {
    return {
      check_url: settings.checkUrl ?? this.checkUrl,
      check_after_seconds: settings.checkAfterSeconds,
      max_checks: settings.maxChecks,
    };
  }

  private body(draft: MessageDraft): Record<string, unknown> {
    const deliverAfter = draft.deliverAfter instanceof Date
      ? draft.deliverAfter.toISOString() : draft.deliverAfter;
    return compact({
      ...memberBody(draft),
      ...this.checkBackFields(draft),
      deliver_after: deliverAfter,
      delay_seconds: draft.delaySeconds,
    });
  }
}

function memberBody(draft: MemberDraft): Record<string, unknown> {
  return compact({
    message_id: draft.messageId ?? newMessageId(),
    topic: draft.topic,
    key: draft.key,
    payload: draft.payload,
    headers: draft.headers,
    ack_timeout_seconds: draft.ackTimeoutSeconds,
    max_deliveries: draft.maxDeliveries,
  });
}

const SINGLE_ONLY = ["checkUrl", "checkAfterSeconds", "maxChecks", "deliverAfter", "delaySeconds"] as const;

/** A transaction's member as a request item; check-back and delay fields are refused. */
function itemBody(draft: MemberDraft): Record<string, unknown> {
  const own = SINGLE_ONLY.filter((name) => (draft as MessageDraft)[name] !== undefined);
  if (own.length > 0) {
    throw new TypeError(`a message of a transaction has no ${own.join(", ")} of its own: `
      + "give the check-back fields to the transaction");
  }
  return memberBody(draft);
}

function compact(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}
