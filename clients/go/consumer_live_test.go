package rms

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// lossyAcker loses the first ack of the messages in lose (the answer never reaches RMS),
// as a crash between the commit and the ack would; then acks with the acker chosen per
// message.
type lossyAcker struct {
	mu     sync.Mutex
	lose   map[string]bool
	ackers map[string]Acker
	acked  map[string]int
}

func (a *lossyAcker) Ack(ctx context.Context, messageID, createdAt string) error {
	a.mu.Lock()
	lost := a.lose[messageID]
	delete(a.lose, messageID)
	a.mu.Unlock()
	if lost {
		return errors.New("ack lost")
	}
	if err := a.ackers[messageID].Ack(ctx, messageID, createdAt); err != nil {
		return err
	}
	a.mu.Lock()
	a.acked[messageID]++
	a.mu.Unlock()
	return nil
}

// A consumer receives two records; the first one's ack is lost, so RMS redelivers it and
// the inbox skips the redelivery; one message is acked over HTTP, the other with a signed
// record on the ack topic, and both end done, each processed once.
func TestAConsumerDeduplicatesARedeliveryAndAcksOverHTTPAndTheAckTopic(t *testing.T) {
	env := live(t)
	topic := env.topic("orders-consumed")
	producer := env.newApp(t, "shop", []string{topic}, nil)
	consumerApp := env.newApp(t, "points", nil, []string{topic})
	producerClient := env.client(t, producer)
	ctx := context.Background()
	overHTTP, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: map[string]int{"points": 5}})
	if err != nil {
		t.Fatal(err)
	}
	traceID, _ := trace.TraceIDFromHex("5bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("10f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	overTopic, err := producerClient.Send(traced, Draft{Topic: topic, Payload: map[string]int{"points": 7}})
	if err != nil {
		t.Fatal(err)
	}

	db := env.db(t)
	inbox, err := NewInbox(db, "go_points_inbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE go_points (message_id text, points int)`); err != nil {
		t.Fatal(err)
	}
	topicAcker, err := NewTopicAcker(nil, []string{env.brokers}, consumerApp.name,
		consumerApp.secret, env.ackTopic)
	if err != nil {
		t.Fatal(err)
	}
	defer topicAcker.Close()
	acker := &lossyAcker{lose: map[string]bool{overHTTP.MessageID: true}, acked: map[string]int{},
		ackers: map[string]Acker{
			overHTTP.MessageID:  HTTPAcker{Client: env.client(t, consumerApp)},
			overTopic.MessageID: topicAcker,
		}}
	recordTraces := map[string]trace.TraceID{}
	createdAts := map[string]string{}
	consumer, err := NewConsumer(ConsumerConfig{App: consumerApp.name,
		Brokers: []string{env.brokers}, Group: env.prefix + "-points", Topics: []string{topic}, Inbox: inbox, Acker: acker,
		Handler: func(ctx context.Context, tx *sql.Tx, record *Record) error {
			recordTraces[record.MessageID] = trace.SpanContextFromContext(ctx).TraceID()
			createdAts[record.MessageID] = record.CreatedAt
			var payload struct{ Points int }
			if err := record.Decode(&payload); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO go_points VALUES ($1, $2)`,
				record.MessageID, payload.Points)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	seen := map[string][]Outcome{}
	deadline := time.Now().Add(40 * time.Second)
	for len(seen[overHTTP.MessageID]) < 2 || len(seen[overTopic.MessageID]) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("records seen: %v", seen)
		}
		poll, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds the fetch, the handling and the acks
		report, err := consumer.PollOnce(poll)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range report.Records {
			if r.Err != nil {
				t.Fatalf("handler of %s failed: %v", r.MessageID, r.Err)
			}
			seen[r.MessageID] = append(seen[r.MessageID], r.Outcome)
		}
	}
	if got := seen[overHTTP.MessageID]; got[0] != Processed || got[1] != Duplicate {
		t.Fatalf("the record and its redelivery: %v", got)
	}
	eventually(t, 20*time.Second, "both messages done (HTTP ack: "+
		stateOf(producerClient, overHTTP.MessageID)+", topic ack: "+
		stateOf(producerClient, overTopic.MessageID)+" at the start of the wait)", func() bool {
		return stateOf(producerClient, overHTTP.MessageID) == StateDone &&
			stateOf(producerClient, overTopic.MessageID) == StateDone
	})
	done, _ := producerClient.Get(ctx, overHTTP.MessageID)
	if done.DeliveryCount < 2 {
		t.Fatalf("the first message was not redelivered: %+v", done)
	}
	rows, err := db.QueryContext(ctx, `SELECT message_id, count(*) FROM go_points GROUP BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	effects := map[string]int{}
	for rows.Next() {
		var id string
		var count int
		if err := rows.Scan(&id, &count); err != nil {
			t.Fatal(err)
		}
		effects[id] = count
	}
	if effects[overHTTP.MessageID] != 1 || effects[overTopic.MessageID] != 1 || len(effects) != 2 {
		t.Fatalf("effects applied: %v", effects)
	}
	if acker.acked[overHTTP.MessageID] != 1 || acker.acked[overTopic.MessageID] != 1 {
		t.Fatalf("acks: %v", acker.acked)
	}
	if recordTraces[overTopic.MessageID] != traceID {
		t.Fatalf("the handler did not run in the producer's trace: %v", recordTraces)
	}
	value, ackTrace := ackRecordOf(t, env, overTopic.MessageID)
	if len(ackTrace) < 35 || ackTrace[3:35] != traceID.String() {
		t.Fatalf("the ack record's traceparent %q is not in the producer's trace", ackTrace)
	}
	want := `{"message_id":"` + overTopic.MessageID + `","consumer":"` + consumerApp.name +
		`","created_at":"` + createdAts[overTopic.MessageID] + `"}`
	if createdAts[overTopic.MessageID] == "" || value != want {
		t.Fatalf("the ack record's value %s, want %s", value, want)
	}
}

// An ack record naming another instance of the message id (a created_at one second off, as
// a replayed record of an earlier message with the same id would) changes nothing: RMS
// refuses it as stale and the message stays sent; the right created_at then finishes it.
func TestAnAckRecordForAnotherInstanceOfTheIdLeavesTheMessageSent(t *testing.T) {
	env := live(t)
	topic := env.topic("orders-stale")
	producer := env.newApp(t, "stale-shop", []string{topic}, nil)
	consumerApp := env.newApp(t, "stale-points", nil, []string{topic})
	producerClient := env.client(t, producer)
	ctx := context.Background()
	target, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: map[string]int{"points": 1}})
	if err != nil {
		t.Fatal(err)
	}
	sentinel, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: map[string]int{"points": 2}})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := kgo.NewClient(kgo.SeedBrokers(env.brokers), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	ack := func(id, createdAt string) *kgo.Record {
		record, err := SignedAck(env.ackTopic, id, createdAt, consumerApp.name,
			consumerApp.secret, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		record.Key = []byte(target.MessageID) // one partition: RMS reads them in this order
		return record
	}
	created := func(id string) time.Time {
		m, err := producerClient.Get(ctx, id)
		if err != nil || m.State != StateSent {
			t.Fatalf("message %s: %+v, %v", id, m, err)
		}
		return m.CreatedAt
	}
	wrong := created(target.MessageID).Add(time.Second).Format(time.RFC3339Nano)
	right := created(sentinel.MessageID).Format(time.RFC3339Nano)
	if err := writer.ProduceSync(ctx, ack(target.MessageID, wrong),
		ack(sentinel.MessageID, right)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the ack after the wrong one applied", func() bool {
		return stateOf(producerClient, sentinel.MessageID) == StateDone
	})
	if state := stateOf(producerClient, target.MessageID); state != StateSent {
		t.Fatalf("an ack naming created_at %s (not the message's) made it %q", wrong, state)
	}
	right = created(target.MessageID).Format(time.RFC3339Nano)
	if err := writer.ProduceSync(ctx, ack(target.MessageID, right)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the ack naming the message's created_at applied", func() bool {
		return stateOf(producerClient, target.MessageID) == StateDone
	})
}

// ackRecordOf is the value and the traceparent header of the ack record of messageID on
// the ack topic.
func ackRecordOf(t *testing.T, env liveEnv, messageID string) (value, traceparent string) {
	t.Helper()
	found := env.readTopic(t, env.ackTopic, func(record *kgo.Record) bool {
		var ack struct {
			MessageID string `json:"message_id"`
		}
		if json.Unmarshal(record.Value, &ack) != nil || ack.MessageID != messageID {
			return false
		}
		value = string(record.Value)
		for _, h := range record.Headers {
			if h.Key == "traceparent" {
				traceparent = string(h.Value)
				break
			}
		}
		return true
	})
	if found {
		return value, traceparent
	}
	t.Fatalf("no ack record of %s on %s", messageID, env.ackTopic)
	return "", ""
}
