package rms

import (
	"context"
	"errors"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

func TestParseRecordReadsTheRMSHeaders(t *testing.T) {
	traceparent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	record, err := ParseRecord(&kgo.Record{Topic: "orders.paid", Partition: 2, Offset: 41,
		Key: []byte("order-7"), Value: []byte(`{"order":7}`), Headers: []kgo.RecordHeader{
			{Key: HeaderMessageID, Value: []byte("m-7")},
			{Key: HeaderApp, Value: []byte("orders")},
			{Key: HeaderDelivery, Value: []byte("2")},
			{Key: HeaderCreatedAt, Value: []byte("2026-11-26T08:00:00Z")},
			{Key: "traceparent", Value: []byte(traceparent)},
			{Key: "source", Value: []byte("web")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if record.MessageID != "m-7" || record.App != "orders" || record.Delivery != 2 ||
		record.CreatedAt != "2026-11-26T08:00:00Z" || record.Topic != "orders.paid" ||
		record.Partition != 2 || record.Offset != 41 || record.Headers["source"] != "web" {
		t.Fatalf("unexpected record %+v", record)
	}
	var payload struct{ Order int }
	if err := record.Decode(&payload); err != nil || payload.Order != 7 {
		t.Fatalf("payload %+v, %v", payload, err)
	}
	span := trace.SpanContextFromContext(record.Context(context.Background()))
	if span.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || !span.IsRemote() {
		t.Fatalf("trace context not continued: %+v", span)
	}
}

func TestRecordsWithoutAMessageIDAreNotRMSRecords(t *testing.T) {
	_, err := ParseRecord(&kgo.Record{Topic: "t", Value: []byte("{}")})
	if !errors.Is(err, ErrNotRMSRecord) {
		t.Fatalf("want ErrNotRMSRecord, got %v", err)
	}
}

func TestAMalformedDeliveryHeaderReadsAsZero(t *testing.T) {
	record, err := ReadRecord("t", nil, nil, map[string][]byte{
		HeaderMessageID: []byte("m"), HeaderDelivery: []byte("two")})
	if err != nil || record.Delivery != 0 {
		t.Fatalf("record %+v, err %v", record, err)
	}
}

func TestSignedAckIsVerifiableWithTheConsumersSecret(t *testing.T) {
	secret := secretOf("consumer secret")
	record, err := SignedAck("rms.acks", "m-1", "2026-11-26T08:00:00.123456Z", "points", secret,
		time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if string(record.Value) !=
		`{"message_id":"m-1","consumer":"points","created_at":"2026-11-26T08:00:00.123456Z"}` {
		t.Fatalf("value %s", record.Value)
	}
	if string(record.Key) != "m-1" || record.Topic != "rms.acks" {
		t.Fatalf("key %s, topic %s", record.Key, record.Topic)
	}
	headers := map[string][]string{}
	for _, h := range record.Headers {
		headers[textproto.CanonicalMIMEHeaderKey(h.Key)] = []string{string(h.Value)}
	}
	verifier, _ := NewVerifier([]string{secret}, 0)
	if _, _, err := verifier.Verify(headers, record.Value); err != nil {
		t.Fatalf("the ack does not verify: %v", err)
	}
	other, _ := NewVerifier([]string{secretOf("someone else")}, 0)
	if _, _, err := other.Verify(headers, record.Value); err == nil {
		t.Fatal("the ack verifies with another app's secret")
	}
}

func TestAnAckWithoutCreatedAtIsRefused(t *testing.T) {
	record, err := SignedAck("rms.acks", "m-1", "", "points", secretOf("s"), time.Now())
	if !errors.Is(err, ErrNoCreatedAt) || record != nil {
		t.Fatalf("record %v, err %v", record, err)
	}
}

// Hostile records (ids RMS never writes, huge or non-ASCII numbers, empty or binary
// headers, values that are no JSON) are set aside as not RMS's, never a panic; a valid id
// with odd other headers is still read.
func TestHostileRecordsAreSetAsideNeverAPanic(t *testing.T) {
	hostile := []map[string][]byte{
		{},
		{HeaderMessageID: nil},
		{HeaderMessageID: []byte("a/b\n")},
		{HeaderMessageID: []byte(strings.Repeat("m", 5000))},
		{HeaderMessageID: []byte("\xff\xfe")},
		{HeaderMessageID: []byte("..")},
		{HeaderMessageID: []byte("m\x00")},
		{HeaderDelivery: []byte(strings.Repeat("9", 5000))},
	}
	for _, headers := range hostile {
		if _, err := ReadRecord("t", nil, []byte("{"), headers); !errors.Is(err, ErrNotRMSRecord) {
			t.Fatalf("headers %q: want ErrNotRMSRecord, got %v", headers, err)
		}
	}
	for _, delivery := range []string{strings.Repeat("9", 5000), "²", "-1", "1e9", ""} {
		record, err := ReadRecord("t", nil, nil, map[string][]byte{
			HeaderMessageID: []byte("m-1"), HeaderDelivery: []byte(delivery),
			"traceparent": []byte("00-" + strings.Repeat("f", 300))})
		if err != nil || record.Delivery != 0 || record.MessageID != "m-1" {
			t.Fatalf("delivery %q: record %+v, err %v", delivery, record, err)
		}
	}
}
