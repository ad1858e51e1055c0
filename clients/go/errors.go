package rms

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// APIError is an answer of RMS that is not a success: its status and RFC 9457 problem
// document. The 404, 409 and 422 answers come as the more specific [*NotFoundError],
// [*ConflictError] and [*ValidationError], which unwrap to an *APIError, so
// errors.As(err, &apiErr) matches every refusal.
type APIError struct {
	Status int
	// Type, Title and Detail are the problem document's members of the same names.
	Type   string
	Title  string
	Detail string
	// Problem is the whole problem document (extension members included).
	Problem map[string]any
	// RetryAfter is the Retry-After of a 429 or 503 answer (zero when absent).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	detail := e.Detail
	if detail == "" {
		detail = e.Title
	}
	return fmt.Sprintf("rms: %d: %s", e.Status, detail)
}

// Slug is the last segment of the problem type, e.g. "part-of-transaction".
func (e *APIError) Slug() string {
	return e.Type[strings.LastIndex(e.Type, "/")+1:]
}

// NotFoundError is a 404: the message or transaction is unknown, or another app's.
type NotFoundError struct{ APIError }

func (e *NotFoundError) Unwrap() error { return &e.APIError }

// ConflictError is a 409: an illegal transition (CurrentState names the state the message
// or transaction is in), an id reused with other content, or a single confirm or cancel of
// a message that belongs to a transaction (PartOfTransaction, with TransactionID).
type ConflictError struct {
	APIError
	CurrentState  string
	TransactionID string
}

func (e *ConflictError) Unwrap() error { return &e.APIError }

// PartOfTransaction tells whether the message belongs to transaction TransactionID, which
// must be confirmed or cancelled as a whole.
func (e *ConflictError) PartOfTransaction() bool { return e.Slug() == "part-of-transaction" }

// ValidationError is a 422: the request is invalid; Problem["errors"] lists the fields
// when RMS named them.
type ValidationError struct{ APIError }

func (e *ValidationError) Unwrap() error { return &e.APIError }

// UnavailableError means RMS could not be reached, or stayed overloaded (429, 5xx) through
// every attempt. Err is the last transport error, or the last answer as an *APIError.
type UnavailableError struct {
	Attempts int
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("rms: unavailable after %d attempt(s): %v", e.Attempts, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// apiError builds the typed error of a refused request from its status and body.
func apiError(status int, body []byte, retryAfter time.Duration) error {
	base := APIError{Status: status, RetryAfter: retryAfter, Problem: map[string]any{}}
	if json.Unmarshal(body, &base.Problem) != nil || base.Problem == nil {
		base.Problem = map[string]any{}
		base.Detail = strings.TrimSpace(string(truncate(body, 200)))
	}
	base.Type, _ = base.Problem["type"].(string)
	base.Title, _ = base.Problem["title"].(string)
	if detail, ok := base.Problem["detail"].(string); ok {
		base.Detail = detail
	}
	switch status {
	case 404:
		return &NotFoundError{base}
	case 409:
		state, _ := base.Problem["current_state"].(string)
		transaction, _ := base.Problem["transaction_id"].(string)
		return &ConflictError{APIError: base, CurrentState: state, TransactionID: transaction}
	case 422:
		return &ValidationError{base}
	}
	return &base
}

func truncate(body []byte, limit int) []byte {
	if len(body) > limit {
		return body[:limit]
	}
	return body
}
