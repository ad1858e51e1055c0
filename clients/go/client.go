package rms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// maxAnswerBytes bounds how much of an answer the client reads.
const maxAnswerBytes = 64 << 20

// Client talks to RMS's HTTP API as one app (its API key). It is safe for concurrent use.
type Client struct {
	base            *url.URL
	apiKey          string
	http            *http.Client
	retry           RetryPolicy
	defaultCheckURL string
	sleep           func(context.Context, time.Duration) error
}

// Option configures a [Client].
type Option func(*Client)

// WithHTTPClient uses the given *http.Client (its transport, timeouts and proxies).
func WithHTTPClient(client *http.Client) Option { return func(c *Client) { c.http = client } }

// WithRetryPolicy replaces [DefaultRetryPolicy].
func WithRetryPolicy(policy RetryPolicy) Option { return func(c *Client) { c.retry = policy } }

// WithDefaultCheckURL is the check_url of every prepare, send and transaction that names
// none (RMS also knows a per-app default).
func WithDefaultCheckURL(checkURL string) Option {
	return func(c *Client) { c.defaultCheckURL = checkURL }
}

// NewClient is a client of the RMS at baseURL (e.g. "http://rms:8000") for the app whose
// API key is apiKey. Without WithHTTPClient, requests time out after 10 s.
func NewClient(baseURL, apiKey string, options ...Option) (*Client, error) {
	base, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("rms: base URL %q must be http(s)://host[:port]", baseURL)
	}
	c := &Client{base: base, apiKey: apiKey, http: &http.Client{Timeout: 10 * time.Second},
		retry: DefaultRetryPolicy, sleep: sleep}
	for _, option := range options {
		option(c)
	}
	if c.retry.Attempts < 1 {
		return nil, errors.New("rms: RetryPolicy.Attempts must be at least 1")
	}
	return c, nil
}

// call performs one logical request and decodes a successful answer into out (when not
// nil). It retries with the same body: once at once on a connection closed before any
// byte of the answer, and up to RetryPolicy.Attempts times with backoff on other
// transport errors and on 408, 429, 502, 503 and 504 (waiting Retry-After when given).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("rms: encoding the request: %w", err)
		}
	}
	reopened := false
	for attempt := 1; ; attempt++ {
		status, answer, header, err := c.once(ctx, method, path, payload)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if closedBeforeAnswer(err) && !reopened {
				reopened = true // the server dropped a kept-alive connection: ask again now
				attempt--
				continue
			}
			if attempt >= c.retry.Attempts {
				return &UnavailableError{Attempts: attempt, Err: err}
			}
			if err := c.sleep(ctx, c.retry.delay(attempt)); err != nil {
				return err
			}
			continue
		}
		if status >= 200 && status < 300 {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(answer, out); err != nil {
				return fmt.Errorf("rms: decoding the answer of %s %s: %w", method, path, err)
			}
			return nil
		}
		wait, hasWait := ParseRetryAfter(header.Get("Retry-After"), time.Now())
		refused := apiError(status, answer, wait)
		if !retryStatuses[status] {
			return refused
		}
		if attempt >= c.retry.Attempts || (hasWait && wait > c.retry.MaxRetryAfter) {
			return &UnavailableError{Attempts: attempt, Err: refused}
		}
		if !hasWait {
			wait = c.retry.delay(attempt)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// once sends one attempt and reads its whole answer.
func (c *Client) once(ctx context.Context, method, path string, payload []byte,
) (int, []byte, http.Header, error) {
	var reader io.Reader
	if payload != nil {
		reader = bytes.NewReader(payload)
	}
	request, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	request.Header.Set("Authorization", "Bearer "+c.apiKey)
	request.Header.Set("Accept", "application/json")
	request.Header.Set("User-Agent", userAgent)
	if payload != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	injectTrace(ctx, request.Header)
	response, err := c.http.Do(request)
	if err != nil {
		return 0, nil, nil, err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(response.Body, maxAnswerBytes))
	if err != nil {
		return 0, nil, nil, err
	}
	return response.StatusCode, answer, response.Header, nil
}

// injectTrace adds the W3C traceparent / tracestate of the span in ctx (OpenTelemetry), so
// RMS stores it with a prepared message and carries it on to the consumer. Nothing is
// added outside a span.
func injectTrace(ctx context.Context, header http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(header))
}

func sleep(ctx context.Context, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func escape(id string) string { return url.PathEscape(id) }
