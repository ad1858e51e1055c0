package rms

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// crashingAcker dies at the first ack, as a process killed after its handler committed
// would: it acks nothing and cancels the poll, so no offset is committed either.
type crashingAcker struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	asked  []string
}

func (a *crashingAcker) Ack(_ context.Context, messageID, _ string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, messageID)
	a.cancel()
	return errors.New("the consumer's process died")
}

// service is a consumer app of the live RMS with its own inbox and effects tables.
type service struct {
	app      app
	table    string
	db       *sql.DB
	inbox    *Inbox
	outcomes map[string][]Outcome
}

func newService(t *testing.T, env liveEnv, db *sql.DB, role, topic string) *service {
	t.Helper()
	s := &service{app: env.newApp(t, "two-"+role, nil, []string{topic}), db: db,
		table: "go_two_" + role + "_effects", outcomes: map[string][]Outcome{}}
	inbox, err := NewInbox(db, "go_two_"+role+"_inbox")
	if err != nil {
		t.Fatal(err)
	}
	s.inbox = inbox
	if err := inbox.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE ` + s.table + ` (message_id text)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *service) consumer(t *testing.T, env liveEnv, topic string, acker Acker) *Consumer {
	t.Helper()
	consumer, err := NewConsumer(ConsumerConfig{App: s.app.name, Brokers: []string{env.brokers},
		Group: s.app.name, Topics: []string{topic}, Inbox: s.inbox, Acker: acker,
		Handler: func(ctx context.Context, tx *sql.Tx, record *Record) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO `+s.table+` VALUES ($1)`, record.MessageID)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	return consumer
}

// pollUntil polls with consumer until done holds, recording each record's outcome.
func (s *service) pollUntil(t *testing.T, consumer *Consumer, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 60s: %s (outcomes %v)", what, s.outcomes)
		}
		poll, cancel := context.WithTimeout(context.Background(), time.Second)
		report, err := consumer.PollOnce(poll)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range report.Records {
			s.outcomes[r.MessageID] = append(s.outcomes[r.MessageID], r.Outcome)
		}
	}
}

func (s *service) effects(t *testing.T, messageID string) int {
	t.Helper()
	var count int
	if err := s.db.QueryRow(`SELECT count(*) FROM `+s.table+` WHERE message_id = $1`,
		messageID).Scan(&count); err != nil {
		t.Fatal(err)
	}
	return count
}

// subscribersOf is the message's subscribers as the admin API shows them.
func subscribersOf(t *testing.T, env liveEnv, messageID string) map[string]map[string]any {
	t.Helper()
	request, _ := http.NewRequest("GET", env.url+"/v1/admin/messages/"+messageID, nil)
	request.Header.Set("Authorization", "Bearer "+env.admin)
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	var message struct {
		Subscribers []map[string]any `json:"subscribers"`
	}
	if response.StatusCode != 200 || json.Unmarshal(body, &message) != nil {
		t.Fatalf("message %s: %d %s", messageID, response.StatusCode, body)
	}
	found := map[string]map[string]any{}
	for _, subscriber := range message.Subscribers {
		found[subscriber["app"].(string)] = subscriber
	}
	return found
}

// Two consumer apps on one topic: points handles the message and acks it; billing handles
// it and its process dies as it acks. RMS redelivers the message naming only billing in
// rms-awaiting: points' consumer skips the redelivery, billing's restarted consumer handles
// it (its inbox knows the id) and acks, and the message is done with both acks.
func TestTwoConsumerAppsOneCrashingBeforeItsAck(t *testing.T) {
	env := live(t)
	topic := env.topic("paid")
	shop := env.newApp(t, "two-shop", []string{topic}, nil)
	db := env.db(t)
	points := newService(t, env, db, "points", topic)
	billing := newService(t, env, db, "billing", topic)
	shopClient := env.client(t, shop)
	ctx := context.Background()
	sent, err := shopClient.Send(ctx, Draft{Topic: topic, Payload: map[string]int{"order": 7},
		AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := sent.MessageID

	crashing := &crashingAcker{}
	dying := billing.consumer(t, env, topic, crashing)
	for deadline := time.Now().Add(60 * time.Second); len(crashing.asked) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("billing did not handle the record within 60s")
		}
		poll, cancel := context.WithTimeout(ctx, 5*time.Second) // bounds the fetch, the handling and the acks
		crashing.cancel = cancel
		_, _ = dying.PollOnce(poll)
		cancel()
	}
	dying.Close()
	if !slices.Equal(crashing.asked, []string{id}) || billing.effects(t, id) != 1 {
		t.Fatalf("billing before its crash: asked %v, effects %d", crashing.asked,
			billing.effects(t, id))
	}

	reader := points.consumer(t, env, topic, HTTPAcker{Client: env.client(t, points.app)})
	points.pollUntil(t, reader, "points to handle and ack the message, then skip its redelivery",
		func() bool { return slices.Contains(points.outcomes[id], NotAwaited) })
	reader.Close()
	if points.outcomes[id][0] != Processed || points.effects(t, id) != 1 {
		t.Fatalf("points: outcomes %v, effects %d", points.outcomes[id], points.effects(t, id))
	}
	waiting, err := shopClient.Get(ctx, id)
	if err != nil || waiting.State != StateSent || waiting.DeliveryCount < 2 {
		t.Fatalf("while billing owes its ack: %+v, %v", waiting, err)
	}

	restarted := billing.consumer(t, env, topic, HTTPAcker{Client: env.client(t, billing.app)})
	defer restarted.Close()
	billing.pollUntil(t, restarted, "billing's restarted consumer to ack", func() bool {
		return stateOf(shopClient, id) == StateDone
	})
	notDuplicate := func(outcome Outcome) bool { return outcome != Duplicate }
	if len(billing.outcomes[id]) == 0 || slices.ContainsFunc(billing.outcomes[id], notDuplicate) {
		t.Fatalf("billing after its restart: %v (its inbox had the id)", billing.outcomes[id])
	}
	if billing.effects(t, id) != 1 {
		t.Fatalf("billing's effect applied %d times", billing.effects(t, id))
	}
	subscribers := subscribersOf(t, env, id)
	for _, name := range []string{points.app.name, billing.app.name} {
		if subscribers[name]["acked_at"] == nil || subscribers[name]["via"] != "http" {
			t.Fatalf("subscriber %s: %v", name, subscribers)
		}
	}
	if len(subscribers) != 2 {
		t.Fatalf("subscribers: %v", subscribers)
	}
}
