package rms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// CheckStatus is a check-back's answer.
type CheckStatus string

// The three answers of a check-back (design section 5).
const (
	Committed  CheckStatus = "committed"
	RolledBack CheckStatus = "rolled_back"
	Unknown    CheckStatus = "unknown"
)

// maxCheckBody bounds a check-back body (RMS's are far smaller).
const maxCheckBody = 1 << 20

// CheckRequest is the body RMS sends about one message.
type CheckRequest struct {
	MessageID  string            `json:"message_id"`
	App        string            `json:"app"`
	Topic      string            `json:"topic"`
	Key        *string           `json:"key"`
	Headers    map[string]string `json:"headers"`
	CreatedAt  string            `json:"created_at"`
	CheckCount int               `json:"check_count"`
}

// TransactionCheckRequest is the body RMS sends about a transaction of several messages:
// one call for all of them (MessageIDs in the transaction's order).
type TransactionCheckRequest struct {
	TransactionID string   `json:"transaction_id"`
	App           string   `json:"app"`
	MessageIDs    []string `json:"message_ids"`
	CreatedAt     string   `json:"created_at"`
	CheckCount    int      `json:"check_count"`
}

// Resolver answers whether the local transaction of a message committed. An error
// answers Unknown (RMS asks again later).
type Resolver func(ctx context.Context, check CheckRequest) (CheckStatus, error)

// TransactionResolver answers for a transaction of several messages.
type TransactionResolver func(ctx context.Context, check TransactionCheckRequest) (CheckStatus, error)

// ReplayGuard remembers the webhook-ids already answered. Several replicas behind a load
// balancer should share one (for example a table with a unique id).
type ReplayGuard interface {
	// FirstUse is true the first time id is seen; it is remembered until until.
	FirstUse(ctx context.Context, id string, until time.Time) (bool, error)
}

// MemoryReplayGuard remembers ids in this process. An id older than the tolerance is
// refused by its timestamp anyway, so forgetting it then is safe.
type MemoryReplayGuard struct {
	mu        sync.Mutex
	seen      map[string]time.Time
	nextPrune time.Time
}

// FirstUse implements [ReplayGuard].
func (g *MemoryReplayGuard) FirstUse(_ context.Context, id string, until time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if g.seen == nil {
		g.seen = map[string]time.Time{}
	}
	if now.After(g.nextPrune) {
		for seen, expires := range g.seen {
			if expires.Before(now) {
				delete(g.seen, seen)
			}
		}
		g.nextPrune = now.Add(10 * time.Second)
	}
	if _, ok := g.seen[id]; ok {
		return false, nil
	}
	g.seen[id] = until
	return true, nil
}

// CheckBack is the producer's check-back endpoint (design section 5): it proves a call is
// RMS's (Standard Webhooks signature over the raw body, timestamp within the tolerance,
// each webhook-id used once) and answers with the application's resolver.
//
// [CheckBack.Handle] is framework-neutral; a CheckBack is also an http.Handler.
type CheckBack struct {
	verifier           *Verifier
	tolerance          time.Duration
	guard              ReplayGuard
	resolve            Resolver
	resolveTransaction TransactionResolver
	logger             *slog.Logger
}

// CheckBackOption configures a [CheckBack].
type CheckBackOption func(*CheckBack)

// WithTransactionResolver answers check-backs about transactions of several messages
// (without it they answer Unknown).
func WithTransactionResolver(resolve TransactionResolver) CheckBackOption {
	return func(c *CheckBack) { c.resolveTransaction = resolve }
}

// WithTolerance sets how old (or how far ahead) a webhook-timestamp may be.
func WithTolerance(tolerance time.Duration) CheckBackOption {
	return func(c *CheckBack) { c.tolerance = tolerance }
}

// WithReplayGuard replaces the in-memory [MemoryReplayGuard].
func WithReplayGuard(guard ReplayGuard) CheckBackOption {
	return func(c *CheckBack) { c.guard = guard }
}

// WithLogger logs answers and resolver failures to logger (default slog.Default()).
func WithLogger(logger *slog.Logger) CheckBackOption {
	return func(c *CheckBack) { c.logger = logger }
}

// NewCheckBack answers check-backs signed with any of secrets (the app's "whsec_"
// signing secrets; pass both during a rotation) with resolve.
func NewCheckBack(secrets []string, resolve Resolver, options ...CheckBackOption,
) (*CheckBack, error) {
	if resolve == nil {
		return nil, errors.New("rms: a check-back needs a resolver")
	}
	c := &CheckBack{tolerance: DefaultTolerance, guard: &MemoryReplayGuard{}, resolve: resolve,
		logger: slog.Default()}
	for _, option := range options {
		option(c)
	}
	verifier, err := NewVerifier(secrets, c.tolerance)
	if err != nil {
		return nil, err
	}
	c.verifier = verifier
	return c, nil
}

// Handle answers one check-back call: status 200 with {"status": ...}, or a problem
// document (application/problem+json) with 401 (signature missing, wrong or stale), 409
// (webhook-id replayed) or 422 (not a check-back body). Header names are matched in any
// case, so headers may come from any server framework as a plain map.
func (c *CheckBack) Handle(ctx context.Context, headers map[string][]string, body []byte) (int, []byte) {
	id, at, err := c.verifier.Verify(headers, body)
	if err != nil {
		return problemAnswer(http.StatusUnauthorized, "Invalid signature", err.Error())
	}
	first, err := c.guard.FirstUse(ctx, id, at.Add(2*c.tolerance))
	if err != nil {
		c.logger.ErrorContext(ctx, "rms: replay guard failed", "webhook_id", id, "error", err)
		return statusAnswer(Unknown)
	}
	if !first {
		return problemAnswer(http.StatusConflict, "Replayed request",
			fmt.Sprintf("webhook-id %q was already used", id))
	}
	var probe struct {
		TransactionID *string `json:"transaction_id"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return problemAnswer(http.StatusUnprocessableEntity, "Not a check-back request",
			err.Error())
	}
	if probe.TransactionID != nil {
		return c.transaction(ctx, body)
	}
	var check CheckRequest
	if err := json.Unmarshal(body, &check); err != nil || check.MessageID == "" {
		return problemAnswer(http.StatusUnprocessableEntity, "Not a check-back request",
			"the body needs message_id or transaction_id")
	}
	status, err := c.resolve(ctx, check)
	return statusAnswer(c.answered(ctx, status, err, "message_id", check.MessageID,
		check.CheckCount))
}

func (c *CheckBack) transaction(ctx context.Context, body []byte) (int, []byte) {
	var check TransactionCheckRequest
	if err := json.Unmarshal(body, &check); err != nil || check.TransactionID == "" {
		return problemAnswer(http.StatusUnprocessableEntity, "Not a check-back request",
			"transaction_id must be a non-empty string")
	}
	if c.resolveTransaction == nil {
		c.logger.WarnContext(ctx, "rms: check-back about a transaction, and no transaction "+
			"resolver", "transaction_id", check.TransactionID)
		return statusAnswer(Unknown)
	}
	status, err := c.resolveTransaction(ctx, check)
	return statusAnswer(c.answered(ctx, status, err, "transaction_id", check.TransactionID,
		check.CheckCount))
}

// answered is the resolver's answer, logged; Unknown when it failed or answered something
// that is not a check status.
func (c *CheckBack) answered(ctx context.Context, status CheckStatus, err error, name, id string,
	attempt int) CheckStatus {
	if err != nil {
		c.logger.ErrorContext(ctx, "rms: check-back resolver failed", name, id,
			"attempt", attempt, "error", err)
		return Unknown
	}
	if status != Committed && status != RolledBack && status != Unknown {
		c.logger.ErrorContext(ctx, "rms: check-back resolver answered an unknown status",
			name, id, "status", string(status))
		return Unknown
	}
	c.logger.InfoContext(ctx, "rms: check-back answered", name, id, "attempt", attempt,
		"outcome", string(status))
	return status
}

// ServeHTTP serves Handle over net/http (POST only). The resolver's context carries the
// call's W3C trace context, so its spans join the trace of the message.
func (c *CheckBack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		status, body := problemAnswer(http.StatusMethodNotAllowed, "Method not allowed",
			"RMS check-backs are POST requests")
		write(w, status, body)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckBody))
	if err != nil {
		status, answer := problemAnswer(http.StatusRequestEntityTooLarge, "Body too large",
			err.Error())
		write(w, status, answer)
		return
	}
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	status, answer := c.Handle(ctx, r.Header, body)
	write(w, status, answer)
}

// canonicalHeaders is headers with canonical names (http.Header's lookups expect them).
func canonicalHeaders(headers map[string][]string) http.Header {
	canonical := make(http.Header, len(headers))
	for name, values := range headers {
		for _, value := range values {
			canonical.Add(name, value)
		}
	}
	return canonical
}

func write(w http.ResponseWriter, status int, body []byte) {
	contentType := "application/json"
	if status != http.StatusOK {
		contentType = "application/problem+json"
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func statusAnswer(status CheckStatus) (int, []byte) {
	body, _ := json.Marshal(map[string]CheckStatus{"status": status})
	return http.StatusOK, body
}

func problemAnswer(status int, title, detail string) (int, []byte) {
	body, _ := json.Marshal(map[string]any{"type": "about:blank", "title": title,
		"status": status, "detail": detail})
	return status, body
}
