package rms

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

type resolverCalls struct {
	messages     []string
	transactions []string
}

func newTestCheckBack(t *testing.T, secret string, calls *resolverCalls) *CheckBack {
	t.Helper()
	checkBack, err := NewCheckBack([]string{secret},
		func(_ context.Context, check CheckRequest) (CheckStatus, error) {
			calls.messages = append(calls.messages, check.MessageID)
			if check.MessageID == "broken" {
				return "", errors.New("database down")
			}
			return Committed, nil
		},
		WithTolerance(time.Minute), WithLogger(slog.New(slog.DiscardHandler)),
		WithTransactionResolver(func(_ context.Context, check TransactionCheckRequest) (CheckStatus, error) {
			calls.transactions = append(calls.transactions, check.TransactionID)
			return RolledBack, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return checkBack
}

// answerStatus reads a 200 check-back answer: answerStatus(t)(checkBack.Handle(...)).
func answerStatus(t *testing.T) func(int, []byte) string {
	return func(status int, body []byte) string {
		t.Helper()
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var answer struct{ Status string }
		if err := json.Unmarshal(body, &answer); err != nil {
			t.Fatal(err)
		}
		return answer.Status
	}
}

func TestCheckBackAsksTheRightResolver(t *testing.T) {
	secret := secretOf("s")
	calls := &resolverCalls{}
	checkBack := newTestCheckBack(t, secret, calls)
	message := []byte(`{"message_id":"m1","app":"a","topic":"t","key":null,"headers":{},` +
		`"created_at":"2026-11-26T08:00:00Z","check_count":1}`)
	transaction := []byte(`{"transaction_id":"tx1","app":"a","message_ids":["m2","m3"],` +
		`"created_at":"2026-11-26T08:00:00Z","check_count":1}`)
	ctx := context.Background()
	if got := answerStatus(t)(checkBack.Handle(ctx,
		signedHeaders(t, secret, "msg_m1_1", time.Now(), message), message)); got != "committed" {
		t.Fatalf("message answered %q", got)
	}
	if got := answerStatus(t)(checkBack.Handle(ctx,
		signedHeaders(t, secret, "txn_tx1_1", time.Now(), transaction), transaction)); got != "rolled_back" {
		t.Fatalf("transaction answered %q", got)
	}
	if len(calls.messages) != 1 || calls.messages[0] != "m1" ||
		len(calls.transactions) != 1 || calls.transactions[0] != "tx1" {
		t.Fatalf("resolver calls %+v", calls)
	}
}

func TestCheckBackAnswersUnknownWhenTheResolverFails(t *testing.T) {
	secret := secretOf("s")
	checkBack := newTestCheckBack(t, secret, &resolverCalls{})
	body := []byte(`{"message_id":"broken","app":"a","topic":"t","created_at":"x","check_count":3}`)
	if got := answerStatus(t)(checkBack.Handle(context.Background(),
		signedHeaders(t, secret, "msg_broken_3", time.Now(), body), body)); got != "unknown" {
		t.Fatalf("answered %q", got)
	}
}

func TestCheckBackRefusesForgedStaleReplayedAndMalformedCalls(t *testing.T) {
	secret := secretOf("s")
	calls := &resolverCalls{}
	checkBack := newTestCheckBack(t, secret, calls)
	body := []byte(`{"message_id":"m1","app":"a","topic":"t","created_at":"x","check_count":1}`)
	ctx := context.Background()
	expect := func(name string, want int, headers http.Header, body []byte) {
		t.Helper()
		status, answer := checkBack.Handle(ctx, headers, body)
		var problem map[string]any
		if status != want || json.Unmarshal(answer, &problem) != nil || problem["status"] != float64(want) {
			t.Fatalf("%s: got %d %s, want a %d problem document", name, status, answer, want)
		}
	}
	expect("forged", 401, signedHeaders(t, secretOf("other"), "a", time.Now(), body), body)
	expect("stale", 401, signedHeaders(t, secret, "b", time.Now().Add(-time.Hour), body), body)
	expect("unsigned", 401, http.Header{}, body)
	first := signedHeaders(t, secret, "c", time.Now(), body)
	answerStatus(t)(checkBack.Handle(ctx, first, body))
	expect("replayed", 409, first, body)
	notJSON := []byte("committed?")
	expect("not JSON", 422, signedHeaders(t, secret, "d", time.Now(), notJSON), notJSON)
	noID := []byte(`{"app":"a"}`)
	expect("no id", 422, signedHeaders(t, secret, "e", time.Now(), noID), noID)
	if len(calls.messages) != 1 {
		t.Fatalf("the resolver ran for refused calls: %+v", calls)
	}
}

func TestCheckBackHeadersMayComeInAnyCase(t *testing.T) {
	secret := secretOf("s")
	checkBack := newTestCheckBack(t, secret, &resolverCalls{})
	body := []byte(`{"message_id":"m1","app":"a","topic":"t","created_at":"x","check_count":1}`)
	lower := map[string][]string{}
	for name, values := range signedHeaders(t, secret, "msg_m1_1", time.Now(), body) {
		lower[strings.ToLower(name)] = values
	}
	if got := answerStatus(t)(checkBack.Handle(context.Background(), lower, body)); got != "committed" {
		t.Fatalf("answered %q", got)
	}
}
