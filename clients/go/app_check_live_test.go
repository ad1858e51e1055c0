package rms

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A consumer whose App is not the app of its API key refuses to start, saying so; one given
// no Group joins the app's group, and one given another group is warned about it.
func TestAConsumerChecksItsAppAgainstItsKeyAndDefaultsItsGroupToIt(t *testing.T) {
	env := live(t)
	topic := env.topic("orders-checked")
	points := env.newApp(t, fmt.Sprintf("checked-%d", time.Now().UnixNano()%1_000_000), nil,
		[]string{topic})
	me, err := env.client(t, points).Me(context.Background())
	if err != nil || me.Name != points.name {
		t.Fatalf("GET /v1/apps/me: %+v, %v", me, err)
	}
	inbox, err := NewInbox(env.db(t), "go_checked_inbox")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	config := ConsumerConfig{App: points.name + "x", Brokers: []string{env.brokers},
		Topics: []string{topic}, Inbox: inbox, Acker: HTTPAcker{Client: env.client(t, points)},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Handler: func(context.Context, *sql.Tx, *Record) error { return nil }}
	if _, err := NewConsumer(config); !errors.Is(err, ErrWrongApp) ||
		!strings.Contains(err.Error(), "its API key is app \""+points.name+"\"'s") {
		t.Fatalf("a misspelled app must be refused, got %v", err)
	}
	if !strings.Contains(logs.String(), "refusing to run") {
		t.Fatalf("no log line says why: %s", logs.String())
	}

	config.App = points.name
	consumer, err := NewConsumer(config)
	if err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	if consumer.config.Group != points.name {
		t.Fatalf("the group defaults to the app's name, not %q", consumer.config.Group)
	}
	logs.Reset()
	config.Group = env.prefix + "-shared"
	shared, err := NewConsumer(config)
	if err != nil {
		t.Fatal(err)
	}
	shared.Close()
	if !strings.Contains(logs.String(), "group of its own") {
		t.Fatalf("no warning for a group that is not the app's: %s", logs.String())
	}
}
