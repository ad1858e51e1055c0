package rms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/rms-dev/rms/clients/go"

// ConsumerConfig configures a [Consumer].
type ConsumerConfig struct {
	// App is the name RMS knows this consumer app by; empty with a [*TopicAcker], the app
	// it signs for.
	App     string
	Brokers []string
	// Group is the Kafka consumer group; empty: App. Each consumer app needs a group of its
	// own: Kafka gives each partition to one member of a group, so an app sharing a group
	// with another misses the records Kafka gives the other's members (NewConsumer logs a
	// warning when Group is not App).
	Group string
	// InstanceID makes the process a static member of its group (group.instance.id): one
	// stable id per process of the app; restarted with the same id it gets its partitions
	// back at once instead of after the session timeout.
	InstanceID string
	Topics     []string
	Inbox      *Inbox
	Handler    Handler
	Acker      Acker
	// MaxRecords bounds one poll (default 200).
	MaxRecords int
	// AckConcurrency bounds the acks in flight (default 16).
	AckConcurrency int
	// KafkaOptions are further franz-go options (security, ...); offsets are always
	// committed by the Consumer, after the acks.
	KafkaOptions []kgo.Opt
	Logger       *slog.Logger
}

// Consumer turns RMS's at-least-once delivery into an exactly-once effect on the
// consumer's database: for each record, the inbox and the handler in one transaction,
// then the ack (also for a skipped duplicate: the first ack may have been lost), then the
// Kafka offsets. A crash anywhere before that makes Kafka deliver the records again, and
// the inbox makes that harmless. A handler that fails is not acked: RMS redelivers the
// message when its ack deadline passes, so one bad message never blocks its partition.
//
// Several apps may consume one topic, and a message is done when each of them acked it. A
// record whose rms-awaiting header does not name the consumer's App is a redelivery for the
// others (this app acked already): it is skipped, neither handled nor acked, logged at info
// and reported as [NotAwaited], and committed past with its batch. A record without the
// header, or with one that cannot be read, is handled.
//
// With OpenTelemetry configured, each handler runs in a span "rms.process" whose parent
// is the record's trace context, and each ack in a span "rms.ack" under it, whose context
// the ack carries; without it, the ack carries the record's context as it came.
type Consumer struct {
	kafka  *kgo.Client
	config ConsumerConfig
	tracer trace.Tracer
	logger *slog.Logger
}

// RecordOutcome is what became of one record of a batch.
type RecordOutcome struct {
	MessageID string
	// CreatedAt is the record's rms-created-at: the instance of the id the ack names.
	CreatedAt string
	Delivery  int
	Outcome   Outcome
	// Err is the handler's error (Failed), or the ack's (nil when acked).
	Err    error
	AckErr error
}

// BatchReport is what one [Consumer.PollOnce] did.
type BatchReport struct {
	Records []RecordOutcome
	// Skipped counts records without rms-message-id (not from RMS): logged, not handled.
	Skipped int
}

// kafkaOptions are the franz-go options of a consumer: its group, topics and instance id,
// then the caller's KafkaOptions; offsets are always committed by the consumer.
func kafkaOptions(config ConsumerConfig) []kgo.Opt {
	options := []kgo.Opt{
		kgo.SeedBrokers(config.Brokers...), kgo.ConsumerGroup(config.Group),
		kgo.ConsumeTopics(config.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// a transaction's records (one Kafka transaction) arrive all or none, and a publish
		// its process never committed is never read (franz-go's default is read uncommitted)
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	if config.InstanceID != "" {
		options = append(options, kgo.InstanceID(config.InstanceID))
	}
	options = append(options, config.KafkaOptions...)
	return append(options, kgo.DisableAutoCommit())
}

// NewConsumer checks App against the app of the acker's API key (an error wrapping
// [ErrWrongApp] when they differ), then joins the consumer group on the topics.
func NewConsumer(config ConsumerConfig) (*Consumer, error) {
	if config.Inbox == nil || config.Handler == nil || config.Acker == nil {
		return nil, errors.New("rms: a consumer needs an Inbox, a Handler and an Acker")
	}
	if len(config.Topics) == 0 || len(config.Brokers) == 0 {
		return nil, errors.New("rms: a consumer needs Brokers and Topics")
	}
	app, err := consumerApp(config.App, config.Acker)
	if err != nil {
		return nil, err
	}
	config.App = app
	if config.MaxRecords <= 0 {
		config.MaxRecords = 200
	}
	if config.AckConcurrency <= 0 {
		config.AckConcurrency = 16
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if err := checkApp(config.App, config.Acker, config.Logger); err != nil {
		return nil, err
	}
	if config.Group == "" {
		config.Group = config.App
	} else if config.Group != config.App {
		config.Logger.Warn("rms: the consumer group is not the app's name: each consumer app "+
			"needs a group of its own, or it misses the records Kafka gives the other apps' "+
			"members", "app", config.App, "group", config.Group)
	}
	client, err := kgo.NewClient(kafkaOptions(config)...)
	if err != nil {
		return nil, fmt.Errorf("rms: consumer: %w", err)
	}
	return &Consumer{kafka: client, config: config, tracer: otel.Tracer(tracerName),
		logger: config.Logger}, nil
}

// consumerApp is the app a consumer acks as: app, or the one its [*TopicAcker] signs for.
func consumerApp(app string, acker Acker) (string, error) {
	signsFor := ""
	if topicAcker, ok := acker.(*TopicAcker); ok {
		signsFor = topicAcker.ConsumerApp()
	}
	if app == "" {
		app = signsFor
	}
	switch {
	case app == "":
		return "", errors.New("rms: a consumer needs App, the name RMS knows this consumer " +
			"app by: it skips the records whose " + HeaderAwaiting + " header does not name it")
	case !ValidAppName(app):
		return "", fmt.Errorf("rms: App %q is not an RMS app name (a lowercase letter or "+
			"digit, then up to 62 of a-z, 0-9, '_' and '-')", app)
	case signsFor != "" && signsFor != app:
		return "", fmt.Errorf("rms: App %q differs from %q, the app the TopicAcker signs "+
			"ack records for", app, signsFor)
	}
	return app, nil
}

// Run consumes until ctx is done; it returns nil then.
func (c *Consumer) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if _, err := c.PollOnce(ctx); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// PollOnce fetches one batch (waiting until records come or ctx is done), handles it,
// acks it, then commits its offsets.
func (c *Consumer) PollOnce(ctx context.Context) (BatchReport, error) {
	fetches := c.kafka.PollRecords(ctx, c.config.MaxRecords)
	if fetches.IsClientClosed() {
		return BatchReport{}, errors.New("rms: the consumer is closed")
	}
	fetches.EachError(func(topic string, partition int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			c.logger.WarnContext(ctx, "rms: fetch failed", "topic", topic,
				"partition", partition, "error", err)
		}
	})
	records := fetches.Records()
	if len(records) == 0 {
		return BatchReport{}, nil
	}
	report := c.Handle(ctx, records)
	if err := c.kafka.CommitRecords(ctx, records...); err != nil {
		// only means the records may come again: the inbox absorbs them
		c.logger.WarnContext(ctx, "rms: offset commit failed", "error", err)
	}
	return report, nil
}

// Handle processes records in order (one transaction each), then acks the handled ones.
func (c *Consumer) Handle(ctx context.Context, records []*kgo.Record) BatchReport {
	var report BatchReport
	contexts := make([]context.Context, 0, len(records))
	for _, kafkaRecord := range records {
		record, err := ParseRecord(kafkaRecord)
		if err != nil {
			c.logger.WarnContext(ctx, "rms: not an RMS record", "topic", kafkaRecord.Topic,
				"partition", kafkaRecord.Partition, "offset", kafkaRecord.Offset)
			report.Skipped++
			continue
		}
		if !record.Awaits(c.config.App) {
			c.logger.InfoContext(ctx, "rms: acked already, skipped", "message_id",
				record.MessageID, "topic", record.Topic, "app", c.config.App,
				"delivery", record.Delivery, HeaderAwaiting, record.Awaiting)
			report.Records = append(report.Records, RecordOutcome{MessageID: record.MessageID,
				CreatedAt: record.CreatedAt, Delivery: record.Delivery, Outcome: NotAwaited})
			contexts = append(contexts, ctx)
			continue
		}
		outcome, spanContext := c.process(ctx, record)
		report.Records = append(report.Records, outcome)
		contexts = append(contexts, spanContext)
	}
	c.ackAll(report.Records, contexts)
	return report
}

func (c *Consumer) process(ctx context.Context, record *Record) (RecordOutcome, context.Context) {
	ctx, span := c.tracer.Start(record.Context(ctx), "rms.process",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", record.Topic),
			attribute.String("rms.message_id", record.MessageID),
			attribute.Int("rms.delivery", record.Delivery)))
	defer span.End()
	outcome, err := c.config.Inbox.Process(ctx, record, c.config.Handler)
	span.SetAttributes(attribute.String("rms.outcome", string(outcome)))
	if err != nil {
		span.SetStatus(codes.Error, "handler failed")
		c.logger.ErrorContext(ctx, "rms: handler failed", "message_id", record.MessageID,
			"topic", record.Topic, "delivery", record.Delivery, "error", err)
	}
	return RecordOutcome{MessageID: record.MessageID, CreatedAt: record.CreatedAt,
		Delivery: record.Delivery, Outcome: outcome, Err: err}, ctx
}

// ackAll acks every processed or duplicate record once per message id, a few at a time.
func (c *Consumer) ackAll(outcomes []RecordOutcome, contexts []context.Context) {
	gate := make(chan struct{}, c.config.AckConcurrency)
	var wg sync.WaitGroup
	acked := map[string]bool{}
	for i := range outcomes {
		if !outcomes[i].Outcome.Acks() || acked[outcomes[i].MessageID] {
			continue
		}
		acked[outcomes[i].MessageID] = true
		wg.Add(1)
		gate <- struct{}{}
		go func(outcome *RecordOutcome, ctx context.Context) {
			defer func() { <-gate; wg.Done() }()
			outcome.AckErr = c.ack(ctx, outcome.MessageID, outcome.CreatedAt)
		}(&outcomes[i], contexts[i])
	}
	wg.Wait()
}

func (c *Consumer) ack(ctx context.Context, messageID, createdAt string) error {
	ctx, span := c.tracer.Start(ctx, "rms.ack", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rms.message_id", messageID)))
	defer span.End()
	err := c.config.Acker.Ack(ctx, messageID, createdAt)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.logger.WarnContext(ctx, "rms: ack failed; RMS will redeliver and the inbox skips it",
			"message_id", messageID, "error", err)
	}
	return err
}

// Close leaves the group; offsets of records not fully handled stay uncommitted.
func (c *Consumer) Close() { c.kafka.Close() }
