package rms

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Message states (design section 3).
const (
	StatePendingSend = "pending-send"
	StateSent        = "sent"
	StateDone        = "done"
	StateDeleted     = "deleted"
)

// Transaction states.
const (
	TransactionPending   = "pending"
	TransactionConfirmed = "confirmed"
	TransactionCancelled = "cancelled"
)

// Draft is a message to prepare or send. Zero values mean "not given" (RMS's or the app's
// default applies). MessageID defaults to a new time-ordered id, fixed before the first
// attempt, which is what makes retries safe.
type Draft struct {
	MessageID string
	Topic     string
	Key       string
	// Payload is any value encoding/json can encode (a json.RawMessage is sent as it is);
	// it becomes the Kafka record's value.
	Payload any
	Headers map[string]string
	// CheckURL, CheckAfter and MaxChecks belong to a single message; a transaction carries
	// its own (see [TransactionDraft]).
	CheckURL      string
	CheckAfter    time.Duration
	MaxChecks     int
	AckTimeout    time.Duration
	MaxDeliveries int
	// Delayed delivery, at most one of the two: not published before DeliverAfter, or
	// not before Delay after the prepare (on RMS's clock).
	DeliverAfter time.Time
	Delay        time.Duration
}

// TransactionDraft is a transaction of several messages: delivered all or none, in the
// order of Messages, and checked back as one at CheckURL.
type TransactionDraft struct {
	TransactionID string
	CheckURL      string
	CheckAfter    time.Duration
	MaxChecks     int
	Messages      []Draft
}

// Message is a message as RMS reports it (design section 4, "The message object").
type Message struct {
	MessageID     string            `json:"message_id"`
	App           string            `json:"app"`
	Topic         string            `json:"topic"`
	Key           *string           `json:"key"`
	Payload       json.RawMessage   `json:"payload"`
	Headers       map[string]string `json:"headers"`
	State         string            `json:"state"`
	Dead          bool              `json:"dead"`
	DeadReason    *string           `json:"dead_reason"`
	CheckCount    int               `json:"check_count"`
	DeliveryCount int               `json:"delivery_count"`
	CreatedAt     time.Time         `json:"created_at"`
	ConfirmedAt   *time.Time        `json:"confirmed_at"`
	DoneAt        *time.Time        `json:"done_at"`
	DeletedAt     *time.Time        `json:"deleted_at"`
	NextCheckAt   *time.Time        `json:"next_check_at"`
	NextDeliverAt *time.Time        `json:"next_delivery_at"`
	Traceparent   *string           `json:"traceparent"`
	Tracestate    *string           `json:"tracestate"`
	Ordered       bool              `json:"ordered"`
	DeliverAfter  *time.Time        `json:"deliver_after"`
}

// Transaction is a transaction of several messages as RMS reports it.
type Transaction struct {
	TransactionID string     `json:"transaction_id"`
	App           string     `json:"app"`
	State         string     `json:"state"`
	Dead          bool       `json:"dead"`
	DeadReason    *string    `json:"dead_reason"`
	CheckCount    int        `json:"check_count"`
	CheckURL      *string    `json:"check_url"`
	MaxChecks     int        `json:"max_checks"`
	CreatedAt     time.Time  `json:"created_at"`
	ConfirmedAt   *time.Time `json:"confirmed_at"`
	CancelledAt   *time.Time `json:"cancelled_at"`
	NextCheckAt   *time.Time `json:"next_check_at"`
	Messages      []Message  `json:"messages"`
}

// MessageIDs are the ids of the transaction's messages, in its order.
func (t *Transaction) MessageIDs() []string {
	ids := make([]string, len(t.Messages))
	for i, m := range t.Messages {
		ids[i] = m.MessageID
	}
	return ids
}

// Event is one entry of a message's history.
type Event struct {
	At     time.Time      `json:"at"`
	Event  string         `json:"event"`
	Detail map[string]any `json:"detail"`
}

// NewID is a new 26-character, time-ordered message id (milliseconds since the epoch and
// 52 random bits, in hex), the same form RMS generates.
func NewID() string {
	random := make([]byte, 7)
	_, _ = rand.Read(random) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%013x%s", time.Now().UnixMilli(), hex.EncodeToString(random)[:13])
}

// body is the prepare (or send) body of d under id.
func (d Draft) body(id, defaultCheckURL string) map[string]any {
	body := d.memberBody(id)
	putCheckBack(body, d.CheckURL, defaultCheckURL, d.CheckAfter, d.MaxChecks)
	return body
}

// putCheckBack puts the check-back fields of a message or a transaction into body, with
// defaultCheckURL when checkURL is empty.
func putCheckBack(body map[string]any, checkURL, defaultCheckURL string, after time.Duration, maxChecks int) {
	if checkURL == "" {
		checkURL = defaultCheckURL
	}
	putString(body, "check_url", checkURL)
	putSeconds(body, "check_after_seconds", after)
	putInt(body, "max_checks", maxChecks)
}

// memberBody is d's body as a message of a transaction (no check-back fields).
func (d Draft) memberBody(id string) map[string]any {
	body := map[string]any{"message_id": id, "topic": d.Topic, "payload": d.Payload}
	putString(body, "key", d.Key)
	if len(d.Headers) > 0 {
		body["headers"] = d.Headers
	}
	putSeconds(body, "ack_timeout_seconds", d.AckTimeout)
	putInt(body, "max_deliveries", d.MaxDeliveries)
	if !d.DeliverAfter.IsZero() {
		body["deliver_after"] = d.DeliverAfter.Format(time.RFC3339Nano)
	}
	putSeconds(body, "delay_seconds", d.Delay)
	return body
}

func (d Draft) checkBackFields() error {
	if d.CheckURL != "" || d.CheckAfter != 0 || d.MaxChecks != 0 {
		return fmt.Errorf("rms: message %q of a transaction has check-back fields of its "+
			"own: give CheckURL, CheckAfter and MaxChecks to the TransactionDraft", d.MessageID)
	}
	return nil
}

func putString(body map[string]any, name, value string) {
	if value != "" {
		body[name] = value
	}
}

func putInt(body map[string]any, name string, value int) {
	if value != 0 {
		body[name] = value
	}
}

func putSeconds(body map[string]any, name string, value time.Duration) {
	if value != 0 {
		body[name] = value.Seconds()
	}
}

func orNewID(id string) string {
	if id == "" {
		return NewID()
	}
	return id
}
