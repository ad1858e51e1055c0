package rms

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// readIDs reads the message ids of the first n records of topic.
func readIDs(t *testing.T, env liveEnv, topic string, n int) []string {
	t.Helper()
	var ids []string
	env.readTopic(t, topic, func(record *kgo.Record) bool {
		parsed, err := ParseRecord(record)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, parsed.MessageID)
		return len(ids) == n
	})
	return ids
}

// localOrder is the producer's local transaction: the barrier mark, then its own change.
func localOrder(ctx context.Context, db *sql.DB, barrier *Barrier, id string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := barrier.MarkCommitted(ctx, tx, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO go_orders (id) VALUES ($1)`, id); err != nil {
		return err
	}
	return tx.Commit()
}

// orderBarrier is a barrier in db (lock timeout 2 s unless options say otherwise) with its
// table, and the go_orders table of localOrder.
func orderBarrier(t *testing.T, db *sql.DB, options ...BarrierOption) *Barrier {
	t.Helper()
	options = append([]BarrierOption{WithLockTimeout(2 * time.Second)}, options...)
	barrier, err := NewBarrier(db, options...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := barrier.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS go_orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return barrier
}

func producerSetup(t *testing.T, env liveEnv, suffix string) (*Client, *sql.DB, *Barrier, string) {
	t.Helper()
	_, client, topic := env.producerApp(t, suffix)
	db := env.db(t)
	return client, db, orderBarrier(t, db), topic
}

func TestPrepareLocalCommitConfirm(t *testing.T) {
	env := live(t)
	client, db, barrier, topic := producerSetup(t, env, "confirm")
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(
		trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	id := NewID()
	message, err := client.Transactional(ctx, Draft{MessageID: id, Topic: topic,
		Payload: map[string]int{"order": 42}},
		func(ctx context.Context, m *Message) error {
			if m.State != StatePendingSend {
				t.Errorf("prepared as %q", m.State)
			}
			return localOrder(ctx, db, barrier, m.MessageID)
		})
	if err != nil {
		t.Fatal(err)
	}
	if message.State != StateSent || message.DeliveryCount != 1 {
		t.Fatalf("after the confirm: %+v", message)
	}
	stored, err := client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Traceparent == nil || (*stored.Traceparent)[3:35] != traceID.String() {
		t.Fatalf("the caller's trace context was not passed on: %v", stored.Traceparent)
	}
	if string(stored.Payload) != `{"order":42}` {
		t.Fatalf("payload %s", stored.Payload)
	}
}

func TestALocalFailureCancels(t *testing.T) {
	env := live(t)
	client, _, _, topic := producerSetup(t, env, "cancel")
	failure := errors.New("stock exhausted")
	message, err := client.Transactional(context.Background(), Draft{Topic: topic, Payload: 1},
		func(context.Context, *Message) error { return failure })
	if !errors.Is(err, failure) {
		t.Fatalf("want the local error, got %v", err)
	}
	if state := stateOf(client, message.MessageID); state != StateDeleted {
		t.Fatalf("after a local failure the message is %q", state)
	}
}

func TestBatchesAndDelayedDelivery(t *testing.T) {
	env := live(t)
	client, _, _, topic := producerSetup(t, env, "batch")
	ctx := context.Background()
	prepared, err := client.PrepareBatch(ctx, []Draft{
		{Topic: topic, Payload: "a"}, {Topic: topic, Payload: "b"}})
	if err != nil || len(prepared) != 2 {
		t.Fatalf("batch prepare: %v, %v", prepared, err)
	}
	confirmed, err := client.ConfirmBatch(ctx, []string{prepared[0].MessageID, prepared[1].MessageID})
	if err != nil || confirmed[0].State != StateSent || confirmed[1].State != StateSent {
		t.Fatalf("batch confirm: %+v, %v", confirmed, err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	delayed, err := client.Send(ctx, Draft{Topic: topic, Payload: "later", DeliverAfter: at})
	if err != nil {
		t.Fatal(err)
	}
	if delayed.State != StateSent || delayed.DeliveryCount != 0 || delayed.DeliverAfter == nil ||
		!delayed.DeliverAfter.Equal(at) {
		t.Fatalf("delayed send: %+v", delayed)
	}
	relative, err := client.Send(ctx, Draft{Topic: topic, Payload: "soon", Delay: 30 * time.Minute})
	if err != nil || relative.DeliveryCount != 0 || relative.DeliverAfter == nil {
		t.Fatalf("send with a delay: %+v, %v", relative, err)
	}
}

func TestATransactionOfThreeMessages(t *testing.T) {
	env := live(t)
	client, db, barrier, topic := producerSetup(t, env, "txn")
	ctx := context.Background()
	drafts := []Draft{{Topic: topic, Key: "order-1", Payload: map[string]string{"step": "paid"}},
		{Topic: topic, Key: "order-1", Payload: map[string]string{"step": "invoiced"}},
		{Topic: topic, Key: "order-1", Payload: map[string]string{"step": "shipped"}}}
	var ids []string
	tx, err := client.InTransaction(ctx, TransactionDraft{Messages: drafts},
		func(ctx context.Context, tx *Transaction) error {
			if tx.State != TransactionPending || len(tx.Messages) != 3 {
				t.Errorf("prepared %+v", tx)
			}
			ids = tx.MessageIDs()
			return localOrder(ctx, db, barrier, tx.TransactionID)
		})
	if err != nil {
		t.Fatal(err)
	}
	if tx.State != TransactionConfirmed || len(tx.Messages) != 3 {
		t.Fatalf("after the confirm: %+v", tx)
	}
	for i, m := range tx.Messages {
		if m.MessageID != ids[i] || m.State != StateSent || m.DeliveryCount != 1 {
			t.Fatalf("message %d after the confirm: %+v (want id %s)", i, m, ids[i])
		}
	}
	stored, err := client.GetTransaction(ctx, tx.TransactionID)
	if err != nil || stored.State != TransactionConfirmed {
		t.Fatalf("read back: %+v, %v", stored, err)
	}
	if published := readIDs(t, env, topic, 3); !slices.Equal(published, ids) {
		t.Fatalf("published in the order %v, listed %v", published, ids)
	}
	cancelled, err := client.InTransaction(ctx, TransactionDraft{Messages: drafts[:2]},
		func(context.Context, *Transaction) error { return errors.New("no stock") })
	if err == nil {
		t.Fatal("a failed local transaction was not reported")
	}
	after, _ := client.GetTransaction(ctx, cancelled.TransactionID)
	if after == nil || after.State != TransactionCancelled || after.Messages[0].State != StateDeleted {
		t.Fatalf("after a local failure: %+v", after)
	}
}
