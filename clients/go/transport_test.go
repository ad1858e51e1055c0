package rms

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// scripted is an HTTP server answering each request with the next step of a script:
// "close" drops the connection before any byte of the answer, a number answers that
// status (with Retry-After when given), "ok" answers a message built from the request.
type scripted struct {
	mu       sync.Mutex
	steps    []step
	requests []map[string]any
	times    []time.Time
}

type step struct {
	action     string
	status     int
	retryAfter string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var request map[string]any
	_ = json.Unmarshal(body, &request)
	s.mu.Lock()
	s.requests = append(s.requests, request)
	s.times = append(s.times, time.Now())
	next := step{action: "ok"}
	if len(s.steps) > 0 {
		next, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	switch next.action {
	case "close":
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
	case "status":
		if next.retryAfter != "" {
			w.Header().Set("Retry-After", next.retryAfter)
		}
		if next.status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close") // as RMS answers a body that came too late
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(next.status)
		_, _ = w.Write([]byte(`{"type":"https://rms.dev/problems/unavailable","title":"Busy",` +
			`"status":503,"detail":"retry shortly"}`))
	default:
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"message_id": request["message_id"],
			"topic": request["topic"], "state": "pending-send",
			"created_at": "2026-11-26T08:00:00Z"})
	}
}

// seen is a copy of the requests received so far and when they came.
func (s *scripted) seen() ([]map[string]any, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...), append([]time.Time(nil), s.times...)
}

func scriptedClient(t *testing.T, policy RetryPolicy, steps ...step) (*Client, *scripted) {
	t.Helper()
	server := &scripted{steps: steps}
	httpServer := httptest.NewServer(server)
	t.Cleanup(httpServer.Close)
	client, err := NewClient(httpServer.URL, "key", WithRetryPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

var noBackoff = RetryPolicy{Attempts: 1, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
	MaxRetryAfter: 5 * time.Second}

func TestAConnectionClosedBeforeTheAnswerIsRetriedOnceWithTheSameID(t *testing.T) {
	client, server := scriptedClient(t, noBackoff, step{action: "close"})
	message, err := client.Prepare(context.Background(), Draft{Topic: "t", Payload: 1})
	requests, _ := server.seen()
	if err != nil {
		t.Fatalf("not retried: %v", err)
	}
	if len(requests) != 2 || requests[0]["message_id"] != requests[1]["message_id"] ||
		message.MessageID != requests[0]["message_id"] {
		t.Fatalf("want two attempts with one id, got %v", requests)
	}
}

func TestOnlyOneImmediateRetryForAClosedConnection(t *testing.T) {
	client, server := scriptedClient(t, noBackoff, step{action: "close"}, step{action: "close"})
	_, err := client.Prepare(context.Background(), Draft{Topic: "t", Payload: 1})
	requests, _ := server.seen()
	var unavailable *UnavailableError
	if !errors.As(err, &unavailable) || len(requests) != 2 {
		t.Fatalf("want UnavailableError after 2 requests, got %v after %d", err, len(requests))
	}
}

func TestRetryAfterIsHonouredOn429And503(t *testing.T) {
	policy := RetryPolicy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		MaxRetryAfter: 5 * time.Second}
	client, server := scriptedClient(t, policy,
		step{action: "status", status: 429, retryAfter: "1"},
		step{action: "status", status: 503, retryAfter: "1"})
	message, err := client.Send(context.Background(), Draft{MessageID: "fixed-id", Topic: "t", Payload: 1})
	requests, times := server.seen()
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) != 3 || message.MessageID != "fixed-id" {
		t.Fatalf("requests %v", requests)
	}
	for i := 1; i < 3; i++ {
		if gap := times[i].Sub(times[i-1]); gap < time.Second {
			t.Fatalf("attempt %d came %v after the one before, before Retry-After", i+1, gap)
		}
	}
}

func TestA408IsRetriedOnANewConnectionWithTheSameMessageID(t *testing.T) {
	policy := RetryPolicy{Attempts: 2, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		MaxRetryAfter: time.Second}
	client, server := scriptedClient(t, policy, step{action: "status", status: 408})
	message, err := client.Send(context.Background(), Draft{MessageID: "fixed-id", Topic: "t", Payload: 1})
	requests, _ := server.seen()
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) != 2 || message.MessageID != "fixed-id" || requests[1]["message_id"] != "fixed-id" {
		t.Fatalf("requests %v", requests)
	}
}

func TestOverloadThroughEveryAttemptIsUnavailableWithTheLastAnswer(t *testing.T) {
	policy := RetryPolicy{Attempts: 2, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		MaxRetryAfter: time.Second}
	client, server := scriptedClient(t, policy, step{action: "status", status: 503},
		step{action: "status", status: 503})
	_, err := client.Confirm(context.Background(), "m1")
	requests, _ := server.seen()
	var unavailable *UnavailableError
	var answer *APIError
	if !errors.As(err, &unavailable) || !errors.As(err, &answer) || answer.Status != 503 ||
		len(requests) != 2 {
		t.Fatalf("got %v after %d requests", err, len(requests))
	}
}

func TestARetryAfterBeyondTheLimitIsReturnedAtOnce(t *testing.T) {
	client, server := scriptedClient(t, DefaultRetryPolicy,
		step{action: "status", status: 429, retryAfter: "3600"})
	_, err := client.Confirm(context.Background(), "m1")
	requests, _ := server.seen()
	var answer *APIError
	if !errors.As(err, &answer) || answer.RetryAfter != time.Hour || len(requests) != 1 {
		t.Fatalf("got %v after %d requests", err, len(requests))
	}
}
