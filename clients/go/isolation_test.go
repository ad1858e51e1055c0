package rms

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The consumer reads read_committed: a transaction's records arrive all or none, and a
// publish RMS never committed is never read. A KafkaOptions entry may choose otherwise.
func TestTheConsumerReadsCommittedRecordsByDefault(t *testing.T) {
	config := ConsumerConfig{Brokers: []string{"127.0.0.1:1"}, Group: "points", Topics: []string{"orders"}}
	client, err := kgo.NewClient(kafkaOptions(config)...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if level := client.OptValue(kgo.FetchIsolationLevel); level != int8(1) { // franz-go stores read committed as 1
		t.Fatalf("isolation level %v, want read committed", level)
	}
	config.KafkaOptions = []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadUncommitted())}
	chosen, err := kgo.NewClient(kafkaOptions(config)...)
	if err != nil {
		t.Fatal(err)
	}
	defer chosen.Close()
	if level := chosen.OptValue(kgo.FetchIsolationLevel); level != int8(0) {
		t.Fatalf("isolation level %v, want the caller's read uncommitted", level)
	}
}
