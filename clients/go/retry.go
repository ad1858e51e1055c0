package rms

import (
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RetryPolicy says how often and how patiently a call is retried. Retrying is safe because
// every RMS call is idempotent by id (the client fixes ids before the first attempt).
type RetryPolicy struct {
	// Attempts is the number of tries of one call, the first included (at least 1).
	Attempts int
	// Backoff is the wait before the second attempt; it doubles per attempt, with jitter.
	Backoff time.Duration
	// MaxBackoff caps the doubling.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits out by itself; an answer
	// asking for longer is returned to the caller (as an *UnavailableError).
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy: 4 attempts, 200 ms doubling up to 5 s, Retry-After up to 30 s.
var DefaultRetryPolicy = RetryPolicy{Attempts: 4, Backoff: 200 * time.Millisecond,
	MaxBackoff: 5 * time.Second, MaxRetryAfter: 30 * time.Second}

// retryStatuses are the answers that mean "try again later": the request's body did not
// arrive in time (no handler ran), rate limited, overloaded or a gateway in between that could
// not reach RMS.
var retryStatuses = map[int]bool{
	http.StatusRequestTimeout: true, http.StatusTooManyRequests: true, http.StatusBadGateway: true,
	http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true,
}

// delay is the wait before attempt number attempt+1 after a failure without Retry-After:
// doubling from Backoff, capped, with jitter in [50%, 100%].
func (p RetryPolicy) delay(attempt int) time.Duration {
	base := p.Backoff << min(attempt-1, 30)
	if base > p.MaxBackoff || base <= 0 {
		base = p.MaxBackoff
	}
	return time.Duration(float64(base) * (0.5 + rand.Float64()/2))
}

// ParseRetryAfter reads a Retry-After header value: delta seconds or an HTTP date (RFC
// 9110 section 10.2.3), relative to now. ok is false when the value is absent or malformed;
// a date in the past gives zero.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.ParseUint(value, 10, 32); err == nil {
		return time.Duration(seconds) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// closedBeforeAnswer tells whether a request failed because the server closed the
// connection before sending any byte of its answer (typically a kept-alive connection the
// server dropped as it was being reused). Such a request is retried once at once.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		// net/http's error for a kept-alive connection closed as the request went out
		strings.Contains(err.Error(), "server closed idle connection")
}
