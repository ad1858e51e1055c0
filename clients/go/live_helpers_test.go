package rms

// Helpers of the tests against a live RMS (tests/system/clients/fixtures.py provides it): the
// RMS_* environment, apps made with the admin API, the test database, a check-back server.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"
)

type liveEnv struct {
	url, admin, brokers, ackTopic, database, prefix string
}

// live is the live RMS's environment; without it the test is skipped, or fails when
// RMS_GO_LIVE=required (the pytest entry sets it, so a missing RMS is never a silent pass).
func live(t *testing.T) liveEnv {
	t.Helper()
	env := liveEnv{url: os.Getenv("RMS_URL"), admin: os.Getenv("RMS_ADMIN_TOKEN"),
		brokers: os.Getenv("RMS_KAFKA_BOOTSTRAP_SERVERS"), ackTopic: os.Getenv("RMS_ACK_TOPIC"),
		database: os.Getenv("RMS_TEST_DATABASE_URL"), prefix: os.Getenv("RMS_TEST_PREFIX")}
	if env.url == "" || env.admin == "" || env.brokers == "" || env.database == "" || env.prefix == "" {
		reason := "no live RMS: set RMS_URL, RMS_ADMIN_TOKEN, RMS_KAFKA_BOOTSTRAP_SERVERS, " +
			"RMS_ACK_TOPIC, RMS_TEST_DATABASE_URL and RMS_TEST_PREFIX (tests/system/clients/test_go.py does)"
		if os.Getenv("RMS_GO_LIVE") == "required" {
			t.Fatal(reason)
		}
		t.Skip(reason)
	}
	return env
}

// app is an app of the live RMS with its check-back server: a free port on 127.0.0.1
// (RMS allows check URLs on its scheme, host and port only), answering with the handler
// set by serveCheckBacks, or "unknown" until then.
type app struct {
	name, apiKey, secret string
	checkURL             string
	checkHandler         *atomic.Pointer[http.Handler]
}

// serveCheckBacks makes handler answer the app's check-backs.
func (a app) serveCheckBacks(handler http.Handler) { a.checkHandler.Store(&handler) }

// newApp creates an app named <prefix>-<suffix> with the admin API.
func (e liveEnv) newApp(t *testing.T, suffix string, produce, consume []string) app {
	t.Helper()
	handler := &atomic.Pointer[http.Handler]{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if serve := handler.Load(); serve != nil {
			(*serve).ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status": "unknown"}`)
	}))
	t.Cleanup(server.Close)
	name := e.prefix + "-" + suffix
	if produce == nil {
		produce = []string{}
	}
	if consume == nil {
		consume = []string{}
	}
	body, _ := json.Marshal(map[string]any{"name": name, "produce_topics": produce,
		"consume_topics": consume, "check_url_prefixes": []string{server.URL + "/"}})
	request, _ := http.NewRequest("POST", e.url+"/v1/admin/apps", bytes.NewReader(body))
	request.Header.Set("Authorization", "Bearer "+e.admin)
	request.Header.Set("Content-Type", "application/json")
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	var created struct {
		APIKey        string `json:"api_key"`
		SigningSecret string `json:"signing_secret"`
	}
	answer, _ := io.ReadAll(response.Body)
	if response.StatusCode != 201 || json.Unmarshal(answer, &created) != nil {
		t.Fatalf("creating app %s: %d %s", name, response.StatusCode, answer)
	}
	return app{name: name, apiKey: created.APIKey, secret: created.SigningSecret,
		checkURL: server.URL + "/rms/check", checkHandler: handler}
}

// topic is a topic name unique to this run: <name>.<prefix>.
func (e liveEnv) topic(name string) string { return name + "." + e.prefix }

// producerApp is an app named <prefix>-<name> that produces to its own topic
// orders-<name>.<prefix>, with its client.
func (e liveEnv) producerApp(t *testing.T, name string) (app, *Client, string) {
	t.Helper()
	topic := e.topic("orders-" + name)
	producer := e.newApp(t, name, []string{topic}, nil)
	return producer, e.client(t, producer), topic
}

// readTopic hands the records of topic, from its start, to visit until visit returns true;
// it reports whether visit did within 20 s.
func (e liveEnv) readTopic(t *testing.T, topic string, visit func(*kgo.Record) bool) bool {
	t.Helper()
	reader, err := kgo.NewClient(kgo.SeedBrokers(e.brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for _, record := range reader.PollFetches(ctx).Records() {
			if visit(record) {
				return true
			}
		}
	}
	return false
}

// client is a client of RMS as app a, its check-back server the default check URL.
func (e liveEnv) client(t *testing.T, a app, options ...Option) *Client {
	t.Helper()
	options = append([]Option{WithDefaultCheckURL(a.checkURL)}, options...)
	client, err := NewClient(e.url, a.apiKey, options...)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (e liveEnv) db(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", e.database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// eventually polls until done holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stateOf is a message's state as its producer reads it ("" when the read failed).
func stateOf(client *Client, id string) string {
	m, err := client.Get(context.Background(), id)
	if err != nil {
		return ""
	}
	return m.State
}
