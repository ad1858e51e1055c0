// Package rms is the Go client of RMS, the reliable message service.
//
// It covers the four places where an application meets RMS:
//
//   - the producer ([Client]): prepare, confirm, cancel, one-shot send, batches,
//     transactions of several messages and delayed delivery over the HTTP API. Every call
//     is idempotent by id, so the client fixes each id before the first attempt and
//     retries with the same id: with backoff on 408, 429, 502, 503 and 504 (honouring
//     Retry-After), and once at once when the connection closed before any byte of the
//     answer. The caller's OpenTelemetry trace context (from its context.Context) travels
//     with each request as W3C traceparent / tracestate headers. RMS's refusals are typed
//     errors: [*NotFoundError], [*ConflictError], [*ValidationError], all wrapping
//     [*APIError].
//   - the check-back endpoint ([CheckBack]): a framework-neutral function from (headers,
//     body) to (status, body) that verifies the Standard Webhooks signature, refuses stale
//     timestamps and replays, and asks the application's resolver; it is also an
//     http.Handler.
//   - the barrier ([Barrier]): the local-transaction marker on database/sql (PostgreSQL)
//     that lets a check-back tell "still running" from "rolled back".
//   - the consumer helpers: reading the rms-* record headers ([ParseRecord]), an idempotent
//     inbox on database/sql ([Inbox]), acknowledgements over HTTP ([HTTPAcker]) or as
//     signed records on the ack topic ([TopicAcker]), and a Kafka consumer loop tying them
//     together ([Consumer]).
package rms
