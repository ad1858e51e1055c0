package rms

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Hostile records on a consumed topic (ids RMS never writes, a delivery of 5000 digits, null
// and binary headers, values that are no JSON, no value at all) are set aside and
// committed past; the RMS record behind them is handled and acked.
func TestHostileRecordsNeverStopTheConsumer(t *testing.T) {
	env := live(t)
	topic := env.topic("orders-hostile")
	producer := env.newApp(t, "hostile-shop", []string{topic}, nil)
	consumerApp := env.newApp(t, "hostile-points", nil, []string{topic})
	producerClient := env.client(t, producer)
	ctx := context.Background()
	writer, err := kgo.NewClient(kgo.SeedBrokers(env.brokers), kgo.DisableIdempotentWrite(),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	header := func(name, value string) kgo.RecordHeader {
		return kgo.RecordHeader{Key: name, Value: []byte(value)}
	}
	hostile := []*kgo.Record{
		{Value: []byte("{"), Headers: []kgo.RecordHeader{header(HeaderMessageID, "a/b\n")}},
		{Value: []byte("{}"), Headers: []kgo.RecordHeader{
			header(HeaderMessageID, strings.Repeat("m", 5000))}},
		{Value: nil, Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: HeaderMessageID}}},
		{Value: []byte("\x00not json"), Headers: []kgo.RecordHeader{
			header(HeaderMessageID, "\xff\xfe"), header(HeaderDelivery, strings.Repeat("9", 5000))}},
		{Value: []byte(`{"n": 1` + strings.Repeat("0", 400) + `}`)},
	}
	if err := writer.ProduceSync(ctx, hostile...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sent, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: map[string]int{"points": 3}})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := NewInbox(env.db(t), "go_hostile_inbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	consumer, err := NewConsumer(ConsumerConfig{App: consumerApp.name,
		Brokers: []string{env.brokers}, Group: env.prefix + "-hostile", Topics: []string{topic}, Inbox: inbox,
		Acker:   HTTPAcker{Client: env.client(t, consumerApp)},
		Handler: func(context.Context, *sql.Tx, *Record) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	skipped, handled := 0, map[string]Outcome{}
	deadline := time.Now().Add(40 * time.Second)
	for handled[sent.MessageID] == "" {
		if time.Now().After(deadline) {
			t.Fatalf("skipped %d, handled %v", skipped, handled)
		}
		poll, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds the fetch, the handling and the acks
		report, err := consumer.PollOnce(poll)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		skipped += report.Skipped
		for _, r := range report.Records {
			handled[r.MessageID] = r.Outcome
		}
	}
	if skipped != len(hostile) || len(handled) != 1 || handled[sent.MessageID] != Processed {
		t.Fatalf("skipped %d of %d hostile records, handled %v", skipped, len(hostile), handled)
	}
	eventually(t, 20*time.Second, "the RMS record behind them acked", func() bool {
		return stateOf(producerClient, sent.MessageID) == StateDone
	})
}
