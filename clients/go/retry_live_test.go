package rms

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// A proxy in front of the live RMS that loses the answer of the first request (RMS stores
// the message, the client sees its connection closed before any byte) and answers the
// second with 429 and Retry-After: the client's third attempt, with the same id, gets the
// stored message, and RMS holds one message.
func TestRetriesReachRMSWithTheSameID(t *testing.T) {
	env := live(t)
	producer, direct, topic := env.producerApp(t, "retry")
	target, _ := url.Parse(env.url)
	forward := httputil.NewSingleHostReverseProxy(target)
	var requests atomic.Int32
	var limitedAt atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			recorder := httptest.NewRecorder()
			forward.ServeHTTP(recorder, r) // RMS stores the message ...
			if recorder.Code != http.StatusCreated {
				t.Errorf("RMS answered the first attempt %d", recorder.Code)
			}
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close() // ... and its answer is lost
		case 2:
			limitedAt.Store(time.Now().UnixNano())
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"type":"about:blank","title":"Too many requests","status":429}`)
		default:
			if since := time.Since(time.Unix(0, limitedAt.Load())); since < time.Second {
				t.Errorf("retried %v after a Retry-After of 1 s", since)
			}
			forward.ServeHTTP(w, r)
		}
	}))
	defer proxy.Close()
	client, err := NewClient(proxy.URL, producer.apiKey, WithDefaultCheckURL(producer.checkURL))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	message, err := client.Prepare(ctx, Draft{Topic: topic, Payload: "once"})
	if err != nil {
		t.Fatal(err)
	}
	if requests.Load() != 3 {
		t.Fatalf("%d requests reached the proxy", requests.Load())
	}
	events, err := direct.Events(ctx, message.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	prepared := 0
	for _, e := range events {
		if e.Event == "prepared" {
			prepared++
		}
	}
	if message.State != StatePendingSend || prepared != 1 {
		t.Fatalf("message %+v with %d prepared events", message, prepared)
	}
}
