package rms

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func awaitingRecord(values ...[]byte) *kgo.Record {
	headers := []kgo.RecordHeader{{Key: HeaderMessageID, Value: []byte("m-1")},
		{Key: HeaderCreatedAt, Value: []byte("2026-11-28T00:00:00.000001Z")}}
	for _, value := range values {
		headers = append(headers, kgo.RecordHeader{Key: HeaderAwaiting, Value: value})
	}
	return &kgo.Record{Topic: "orders.paid", Value: []byte("{}"), Headers: headers}
}

func TestAReadableAwaitingHeaderGivesItsAppNames(t *testing.T) {
	for raw, want := range map[string][]string{
		"points":              {"points"},
		"billing,points":      {"billing", "points"},
		" billing , points\t": {"billing", "points"},
	} {
		record, err := ParseRecord(awaitingRecord([]byte(raw)))
		if err != nil || !slices.Equal(record.Awaiting, want) {
			t.Fatalf("%q: %v, %v", raw, record, err)
		}
	}
}

func TestAnAwaitingHeaderThatCannotBeReadMeansTheRecordIsHandled(t *testing.T) {
	for name, values := range map[string][][]byte{
		"absent":       nil,
		"empty":        {[]byte("")},
		"spaces":       {[]byte("  ")},
		"null value":   {nil},
		"empty name":   {[]byte("billing,,points")},
		"trailing":     {[]byte("billing,")},
		"upper case":   {[]byte("Billing")},
		"inner space":  {[]byte("bill ing")},
		"newline":      {[]byte("billing\n")},
		"not UTF-8":    {[]byte("\xff\xfebilling")},
		"repeated":     {[]byte("billing"), []byte("billing")},
		"two versions": {[]byte("billing"), []byte("points")},
	} {
		record, err := ParseRecord(awaitingRecord(values...))
		if err != nil || record.Awaiting != nil || !record.Awaits("points") {
			t.Fatalf("%s: %+v, %v", name, record, err)
		}
	}
}

func TestOnlyAReadableHeaderWithoutTheAppSkips(t *testing.T) {
	record, _ := ParseRecord(awaitingRecord([]byte("billing")))
	if record.Awaits("points") || !record.Awaits("billing") {
		t.Fatalf("%+v", record)
	}
	fromMap, err := ReadRecord("t", nil, nil, map[string][]byte{HeaderMessageID: []byte("m"),
		HeaderAwaiting: []byte("billing,shipping")})
	if err != nil || fromMap.Awaits("points") || !fromMap.Awaits("shipping") {
		t.Fatalf("%+v, %v", fromMap, err)
	}
}

func FuzzReadingAwaitingNeverPanicsAndSkipsOnlyOnAClearList(f *testing.F) {
	for _, seed := range []string{"points", "a,b", " , ", "\xff", "", strings.Repeat("a", 70)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		names := readAwaiting([][]byte{raw})
		if names == nil {
			return
		}
		for _, name := range names {
			if !ValidAppName(name) || !strings.Contains(string(raw), name) {
				t.Fatalf("%q read as %q", raw, names)
			}
		}
	})
}

type recordingAcker struct{ acked []string }

func (a *recordingAcker) Ack(_ context.Context, messageID, _ string) error {
	a.acked = append(a.acked, messageID)
	return nil
}

// unitConsumer is a consumer whose broker and database are never reached: port 1 answers
// nothing, so the inbox fails as its transaction begins (Failed, not acked).
func unitConsumer(t *testing.T, acker Acker, handled *[]string) *Consumer {
	t.Helper()
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	inbox, _ := NewInbox(db, "")
	consumer, err := NewConsumer(ConsumerConfig{App: "points", Brokers: []string{"127.0.0.1:1"},
		Group: "points", Topics: []string{"orders.paid"}, Inbox: inbox, Acker: acker,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(_ context.Context, _ *sql.Tx, record *Record) error {
			*handled = append(*handled, record.MessageID)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consumer.Close)
	return consumer
}

func TestARecordAwaitedFromOthersOnlyIsSkippedUntouched(t *testing.T) {
	acker, handled := &recordingAcker{}, []string{}
	report := unitConsumer(t, acker, &handled).Handle(context.Background(),
		[]*kgo.Record{awaitingRecord([]byte("billing, shipping"))})
	if len(report.Records) != 1 || report.Records[0].Outcome != NotAwaited ||
		report.Skipped != 0 || len(handled) != 0 || len(acker.acked) != 0 {
		t.Fatalf("report %+v, handled %v, acked %v", report, handled, acker.acked)
	}
}

func TestARecordTheConsumerMayNotSkipReachesTheInbox(t *testing.T) {
	acker, handled := &recordingAcker{}, []string{}
	consumer := unitConsumer(t, acker, &handled)
	for _, record := range []*kgo.Record{awaitingRecord([]byte("points,billing")),
		awaitingRecord([]byte("billing"), []byte("billing")), awaitingRecord([]byte("\xff")),
		awaitingRecord()} {
		report := consumer.Handle(context.Background(), []*kgo.Record{record})
		if len(report.Records) != 1 || report.Records[0].Outcome != Failed {
			t.Fatalf("%v: %+v", record.Headers, report)
		}
	}
	if len(acker.acked) != 0 {
		t.Fatalf("acked %v", acker.acked)
	}
}

func TestAConsumerNeedsItsAppOrTheTopicAckersApp(t *testing.T) {
	signing, err := NewTopicAcker(nil, []string{"127.0.0.1:1"}, "points", secretOf("s"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer signing.Close()
	for app, want := range map[string]string{"": "points", "points": "points"} {
		if got, err := consumerApp(app, signing); got != want || err != nil {
			t.Fatalf("%q: %q, %v", app, got, err)
		}
	}
	for _, bad := range []struct {
		app   string
		acker Acker
		error string
	}{{"", &recordingAcker{}, "needs App"}, {"Points", &recordingAcker{}, "not an RMS app name"},
		{"billing", signing, `differs from "points"`}} {
		if _, err := consumerApp(bad.app, bad.acker); err == nil ||
			!strings.Contains(err.Error(), bad.error) {
			t.Fatalf("%q: %v", bad.app, err)
		}
	}
	if _, err := NewConsumer(ConsumerConfig{Brokers: []string{"127.0.0.1:1"}, Group: "g",
		Topics: []string{"t"}, Inbox: &Inbox{}, Handler: func(context.Context, *sql.Tx,
			*Record) error {
			return nil
		}, Acker: &recordingAcker{}}); err == nil || !strings.Contains(err.Error(), "needs App") {
		t.Fatalf("a consumer without its app: %v", err)
	}
}
