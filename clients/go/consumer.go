package rms

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// The headers RMS puts on every record it publishes (design section 6).
const (
	HeaderMessageID = "rms-message-id"
	HeaderApp       = "rms-app"
	HeaderDelivery  = "rms-delivery"
	HeaderCreatedAt = "rms-created-at"
)

// DefaultAckTopic is RMS's default ack topic (RMS_ACK_TOPIC).
const DefaultAckTopic = "rms.acks"

// ErrNotRMSRecord means a record has no valid rms-message-id header: RMS did not publish
// it, or it was damaged on the way. The consumer sets such a record aside and goes on.
var ErrNotRMSRecord = errors.New("rms: the record has no valid " + HeaderMessageID + " header")

// ErrNoCreatedAt means an ack record was asked for without the acknowledged record's
// rms-created-at: RMS refuses an ack record that names no instance (design section 6).
var ErrNoCreatedAt = errors.New("rms: an ack record needs the acknowledged record's " +
	HeaderCreatedAt + " header; ack this one over HTTP")

// messageIDPattern is RMS's message-id pattern; ids a path would rewrite are reserved.
var messageIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func validMessageID(id string) bool {
	return messageIDPattern.MatchString(id) && id != "batch" && id != "send" && id != "." &&
		id != ".."
}

// Record is a consumed RMS record with its headers read.
type Record struct {
	MessageID string
	// App is the producer app (rms-app).
	App string
	// Delivery is 1 for the first publish, 2 for the first redelivery, ... (0 if absent).
	Delivery int
	// CreatedAt is the message's creation time as RMS wrote it (rms-created-at).
	CreatedAt string
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	// Value is the JSON-encoded payload.
	Value []byte
	// Awaiting is the rms-awaiting header's app names: nil when the record has none or it
	// cannot be read (see [Record.Awaits]).
	Awaiting []string
	// Headers are all the record's headers (the message's own ones included).
	Headers map[string]string
	kafka   *kgo.Record
}

// Decode decodes the payload into v.
func (r *Record) Decode(v any) error { return json.Unmarshal(r.Value, v) }

// Kafka is the underlying franz-go record (nil for a record built by [ReadRecord]).
func (r *Record) Kafka() *kgo.Record { return r.kafka }

// Context is ctx carrying the record's W3C trace context (traceparent / tracestate), so a
// span started from it continues the message's trace.
func (r *Record) Context(ctx context.Context) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(r.Headers))
}

// ParseRecord reads a franz-go record; [ErrNotRMSRecord] when RMS did not publish it.
func ParseRecord(record *kgo.Record) (*Record, error) {
	headers := make(map[string][]byte, len(record.Headers))
	var awaiting [][]byte
	for _, h := range record.Headers {
		headers[h.Key] = h.Value
		if h.Key == HeaderAwaiting {
			awaiting = append(awaiting, h.Value)
		}
	}
	r, err := ReadRecord(record.Topic, record.Key, record.Value, headers)
	if err != nil {
		return nil, err
	}
	r.Partition, r.Offset, r.kafka = record.Partition, record.Offset, record
	r.Awaiting = readAwaiting(awaiting) // a repeated header, which the map hides, is unread
	return r, nil
}

// ReadRecord reads the RMS headers of a record from any Kafka client; [ErrNotRMSRecord]
// when it cannot be RMS's. It never panics, whatever the headers hold.
func ReadRecord(topic string, key, value []byte, headers map[string][]byte) (*Record, error) {
	text := make(map[string]string, len(headers))
	for name, raw := range headers {
		text[name] = string(raw)
	}
	id := text[HeaderMessageID]
	if !validMessageID(id) {
		return nil, ErrNotRMSRecord
	}
	delivery, err := strconv.Atoi(text[HeaderDelivery])
	if err != nil || delivery < 0 {
		delivery = 0
	}
	var awaiting [][]byte
	if raw, found := headers[HeaderAwaiting]; found {
		awaiting = [][]byte{raw}
	}
	return &Record{MessageID: id, App: text[HeaderApp], Delivery: delivery,
		CreatedAt: text[HeaderCreatedAt], Topic: topic, Key: key, Value: value,
		Awaiting: readAwaiting(awaiting), Headers: text}, nil
}

// ---- the inbox --------------------------------------------------------------------------

// DefaultInboxTable is the inbox's table name.
const DefaultInboxTable = "rms_inbox"

// Outcome is what the inbox did with a record.
type Outcome string

// The outcomes of [Inbox.Process].
const (
	// Processed: the handler ran and committed with the inbox row.
	Processed Outcome = "processed"
	// Duplicate: the inbox had the id, the handler was skipped (a redelivery).
	Duplicate Outcome = "duplicate"
	// Failed: the handler or the database failed; rolled back, not to be acked.
	Failed Outcome = "failed"
	// NotAwaited: the record's rms-awaiting header does not name the consumer's app, which
	// acknowledged the message already; neither handled nor acked.
	NotAwaited Outcome = "not-awaited"
)

// Acks tells whether the message is to be acknowledged: processed now, or before.
func (o Outcome) Acks() bool { return o == Processed || o == Duplicate }

// Handler applies a message's effects inside tx, the inbox's transaction.
type Handler func(ctx context.Context, tx *sql.Tx, record *Record) error

// Inbox runs a handler at most once per message id: the id is inserted into the inbox
// table in the same database transaction as the handler's changes, so a redelivered
// record finds it and is skipped, and a handler that fails leaves no trace (the message is
// processed again when it comes again). One inbox table serves one handler.
type Inbox struct {
	db    *sql.DB
	table string
}

// NewInbox is an inbox in db (PostgreSQL) in table (empty: [DefaultInboxTable]).
func NewInbox(db *sql.DB, table string) (*Inbox, error) {
	if table == "" {
		table = DefaultInboxTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("rms: inbox table name %q must match %s", table, tableName)
	}
	return &Inbox{db: db, table: table}, nil
}

// CreateTable creates the inbox table if it is missing (or add it to your migrations).
func (i *Inbox) CreateTable(ctx context.Context) error {
	_, err := i.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+i.table+` (
		message_id text PRIMARY KEY,
		topic text NOT NULL,
		processed_at timestamptz NOT NULL DEFAULT now())`)
	return err
}

// Process runs handler for record unless its message id was processed before. The error
// is the handler's (or the database's) when the outcome is Failed.
func (i *Inbox) Process(ctx context.Context, record *Record, handler Handler) (Outcome, error) {
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return Failed, err
	}
	defer func() { _ = tx.Rollback() }()
	var claimed string
	err = tx.QueryRowContext(ctx, `INSERT INTO `+i.table+` (message_id, topic) VALUES ($1, $2)
		ON CONFLICT (message_id) DO NOTHING RETURNING message_id`,
		record.MessageID, record.Topic).Scan(&claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return Duplicate, nil
	}
	if err != nil {
		return Failed, err
	}
	if err := handler(ctx, tx, record); err != nil {
		return Failed, err
	}
	if err := tx.Commit(); err != nil {
		return Failed, err
	}
	return Processed, nil
}

// ---- acknowledgements ---------------------------------------------------------------------

// Acker acknowledges a consumed message to RMS. createdAt is the acknowledged record's
// rms-created-at header as it came ([Record.CreatedAt]): it binds an ack record to that
// instance of the message id (design section 6). [AckRecord] passes both from a record.
type Acker interface {
	Ack(ctx context.Context, messageID, createdAt string) error
}

// AckRecord acknowledges record with acker: its message id and its rms-created-at.
func AckRecord(ctx context.Context, acker Acker, record *Record) error {
	return acker.Ack(ctx, record.MessageID, record.CreatedAt)
}

// HTTPAcker acks with POST /v1/messages/{id}/ack as the consumer app (the client's API
// key), retried like every client call. It does not know the app's name: give it to
// [ConsumerConfig.App].
type HTTPAcker struct{ Client *Client }

// Ack implements [Acker]. An HTTP ack is authenticated with the app's API key when it is
// made, so it cannot be replayed from a log: createdAt is not needed and not sent.
func (a HTTPAcker) Ack(ctx context.Context, messageID, _ string) error {
	_, err := a.Client.Ack(ctx, messageID)
	return err
}

// TopicAcker acks with a record {"message_id", "consumer", "created_at"} on the ack topic
// (design section 6), signed with the consumer app's signing secret: RMS applies only acks
// signed by the app they name, and only to the instance of the id created at created_at
// (the acknowledged record's rms-created-at), so a replayed or late record never finishes
// a newer message that reuses the id. RMS applies it asynchronously; a nil error means the
// broker holds it.
type TopicAcker struct {
	producer *kgo.Client
	owned    bool
	consumer string
	secret   string
	topic    string
}

// NewTopicAcker writes acks for the app named consumerApp, signed with its "whsec_"
// signingSecret, to topic (empty: [DefaultAckTopic]) with producer, a franz-go client
// (nil: one is made for brokers and closed by Close). Ack records are tiny: the client
// made here sends them uncompressed. A producer of your own must not use a codec RMS's
// ack consumer cannot read (franz-go's default is snappy; use
// kgo.ProducerBatchCompression(kgo.NoCompression()) or gzip).
func NewTopicAcker(producer *kgo.Client, brokers []string, consumerApp, signingSecret,
	topic string) (*TopicAcker, error) {
	if _, err := newWebhook(signingSecret); err != nil {
		return nil, err // a malformed secret fails here, not at the first ack
	}
	if consumerApp == "" {
		return nil, errors.New("rms: a topic acker needs the consumer app's name")
	}
	if topic == "" {
		topic = DefaultAckTopic
	}
	a := &TopicAcker{producer: producer, consumer: consumerApp, secret: signingSecret,
		topic: topic}
	if producer == nil {
		client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DisableIdempotentWrite(),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return nil, fmt.Errorf("rms: ack producer: %w", err)
		}
		a.producer, a.owned = client, true
	}
	return a, nil
}

// Ack implements [Acker]: the signed record, with the W3C trace context of ctx as
// further headers (not covered by the signature). An empty createdAt is [ErrNoCreatedAt]:
// nothing is written, since RMS refuses an ack record that names no instance.
func (a *TopicAcker) Ack(ctx context.Context, messageID, createdAt string) error {
	record, err := SignedAck(a.topic, messageID, createdAt, a.consumer, a.secret, time.Now())
	if err != nil {
		return err
	}
	trace := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, trace)
	for name, value := range trace {
		record.Headers = append(record.Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
	}
	return a.producer.ProduceSync(ctx, record).FirstErr()
}

// ConsumerApp is the app the acker signs ack records for.
func (a *TopicAcker) ConsumerApp() string { return a.consumer }

// Close closes the producer the acker made.
func (a *TopicAcker) Close() {
	if a.owned {
		a.producer.Close()
	}
}

// SignedAck is the ack record of messageID, the instance created at createdAt (its
// rms-created-at header as it came; empty: [ErrNoCreatedAt]), by the app consumer on topic:
// the value {"message_id", "consumer", "created_at"} and the Standard Webhooks headers
// signing it at time at.
func SignedAck(topic, messageID, createdAt, consumer, secret string, at time.Time) (*kgo.Record, error) {
	if createdAt == "" {
		return nil, ErrNoCreatedAt
	}
	value, err := json.Marshal(struct {
		MessageID string `json:"message_id"`
		Consumer  string `json:"consumer"`
		CreatedAt string `json:"created_at"`
	}{messageID, consumer, createdAt})
	if err != nil {
		return nil, err
	}
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	id := "ack_" + hex.EncodeToString(random)
	signature, err := Sign(secret, id, at, value)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(messageID), Value: value,
		Headers: []kgo.RecordHeader{
			{Key: HeaderWebhookID, Value: []byte(id)},
			{Key: HeaderWebhookTimestamp, Value: []byte(strconv.FormatInt(at.Unix(), 10))},
			{Key: HeaderWebhookSignature, Value: []byte(signature)},
		}}, nil
}
