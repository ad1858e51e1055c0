package rms

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// A producer that dies between its local commit and the confirm: RMS asks the check-back,
// which the barrier answers. One whose local transaction never ran is rolled back, and the
// barrier then keeps a late local transaction from committing.
func TestACrashAfterTheLocalCommitIsResolvedByTheCheckBack(t *testing.T) {
	env := live(t)
	producer, client, topic := env.producerApp(t, "crash")
	db := env.db(t)
	barrier := orderBarrier(t, db, WithBarrierTable("go_crash_barrier"))
	ctx := context.Background()
	checkBack, err := NewCheckBack([]string{producer.secret}, barrier.Resolve,
		WithTransactionResolver(barrier.ResolveTransaction))
	if err != nil {
		t.Fatal(err)
	}
	producer.serveCheckBacks(checkBack)
	checkURL := producer.checkURL

	committed, err := client.Prepare(ctx, Draft{Topic: topic, Payload: "committed", CheckURL: checkURL})
	if err != nil {
		t.Fatal(err)
	}
	if err := localOrder(ctx, db, barrier, committed.MessageID); err != nil {
		t.Fatal(err)
	}
	// ... and the producer crashes here, before its confirm
	abandoned, err := client.Prepare(ctx, Draft{Topic: topic, Payload: "abandoned", CheckURL: checkURL})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := client.PrepareTransaction(ctx, TransactionDraft{CheckURL: checkURL,
		Messages: []Draft{{Topic: topic, Payload: 1}, {Topic: topic, Payload: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := localOrder(ctx, db, barrier, tx.TransactionID); err != nil {
		t.Fatal(err)
	}

	eventually(t, 20*time.Second, "the check-back confirms the committed message", func() bool {
		return stateOf(client, committed.MessageID) == StateSent
	})
	eventually(t, 20*time.Second, "the check-back rolls the abandoned message back", func() bool {
		return stateOf(client, abandoned.MessageID) == StateDeleted
	})
	eventually(t, 20*time.Second, "the check-back confirms the transaction", func() bool {
		got, err := client.GetTransaction(ctx, tx.TransactionID)
		return err == nil && got.State == TransactionConfirmed
	})
	if err := localOrder(ctx, db, barrier, abandoned.MessageID); !errors.Is(err, ErrBarrierClosed) {
		t.Fatalf("a late local transaction of a rolled-back message: %v", err)
	}
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM go_orders WHERE id = $1`,
		abandoned.MessageID).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the late local transaction committed (%d rows, %v)", rows, err)
	}
	if _, err := client.Confirm(ctx, abandoned.MessageID); err == nil {
		t.Fatal("a rolled-back message was confirmed")
	}
}

// A check-back server refuses what RMS did not sign, or signed too long ago, over HTTP.
func TestTheCheckBackServerRefusesForgedAndStaleCalls(t *testing.T) {
	env := live(t)
	producer := env.newApp(t, "forged", []string{env.topic("orders-forged")}, nil)
	var resolved atomic.Int32
	checkBack, err := NewCheckBack([]string{producer.secret},
		func(context.Context, CheckRequest) (CheckStatus, error) { resolved.Add(1); return Committed, nil })
	if err != nil {
		t.Fatal(err)
	}
	producer.serveCheckBacks(checkBack)
	checkURL := producer.checkURL
	body := []byte(`{"message_id":"m1","app":"` + producer.name + `","topic":"t","key":null,` +
		`"headers":{},"created_at":"2026-11-26T08:00:00Z","check_count":1}`)
	post := func(secret string, at time.Time) int {
		signature, err := Sign(secret, "msg_m1_1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		request, _ := http.NewRequest("POST", checkURL, bytes.NewReader(body))
		request.Header.Set(HeaderWebhookID, "msg_m1_1")
		request.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
		request.Header.Set(HeaderWebhookSignature, signature)
		response, err := http.DefaultClient.Do(request)
		if err != nil {
			t.Fatal(err)
		}
		_ = response.Body.Close()
		if ct := response.Header.Get("Content-Type"); response.StatusCode != 200 &&
			ct != "application/problem+json" {
			t.Fatalf("refusal as %q", ct)
		}
		return response.StatusCode
	}
	forger := env.newApp(t, "forger", []string{env.topic("orders-forger")}, nil)
	if status := post(forger.secret, time.Now()); status != 401 {
		t.Fatalf("forged signature: %d", status)
	}
	if status := post(producer.secret, time.Now().Add(-10*time.Minute)); status != 401 {
		t.Fatalf("stale signature: %d", status)
	}
	if resolved.Load() != 0 {
		t.Fatal("the resolver ran for a refused call")
	}
	if status := post(producer.secret, time.Now()); status != 200 || resolved.Load() != 1 {
		t.Fatalf("a genuine call: %d", status)
	}
	if status := post(producer.secret, time.Now()); status != 409 || resolved.Load() != 1 {
		t.Fatalf("a replayed call: %d", status)
	}
}
