package rms

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// staticRestartBound bounds how long a static member killed and started again with its
// instance id waits before it handles the next record: one rejoin, no rebalance, no session
// timeout.
const staticRestartBound = 8 * time.Second

// A consumer process killed (it cannot leave its group) and started again waits for the
// group's session timeout as a dynamic member; with an InstanceID (static membership) it
// handles the next message within seconds. Prints both gaps.
func TestAStaticMemberKilledAndStartedAgainGetsItsPartitionAtOnce(t *testing.T) {
	env := live(t)
	_, producerClient, topic := env.producerApp(t, "restart-shop")
	ctx := context.Background()
	if _, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: 0}); err != nil {
		t.Fatal(err)
	}
	gaps := map[bool]time.Duration{}
	for _, static := range []bool{false, true} {
		consumerApp := env.newApp(t, fmt.Sprintf("restart-%t", static), nil, []string{topic})
		instance := ""
		if static {
			instance = consumerApp.name + "-0"
		}
		first := startMember(t, env, consumerApp, topic, instance)
		sent, err := producerClient.Send(ctx, Draft{Topic: topic, Payload: 1})
		if err != nil {
			t.Fatal(err)
		}
		first.until(t, sent.MessageID)
		first.kill()
		restarted := startMember(t, env, consumerApp, topic, instance)
		sent, err = producerClient.Send(ctx, Draft{Topic: topic, Payload: 2})
		if err != nil {
			t.Fatal(err)
		}
		gaps[static] = restarted.until(t, sent.MessageID).Sub(restarted.started)
		restarted.kill()
	}
	fmt.Printf("restart gap after a kill: dynamic %.1f s, static %.1f s\n",
		gaps[false].Seconds(), gaps[true].Seconds())
	if gaps[true] > staticRestartBound {
		t.Fatalf("the static member waited %v for its partition", gaps[true])
	}
}

// member is a consumer process: this test binary running TestRestartMember.
type member struct {
	started time.Time
	command *exec.Cmd
	lines   chan string
}

func startMember(t *testing.T, env liveEnv, consumerApp app, topic, instance string) *member {
	t.Helper()
	command := exec.Command(os.Args[0], "-test.run=^TestRestartMember$", "-test.v")
	command.Env = append(os.Environ(), "RMS_RESTART_MEMBER="+strings.Join(
		[]string{consumerApp.name, consumerApp.apiKey, topic, instance}, " "))
	output, err := command.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m := &member{started: time.Now(), command: command, lines: make(chan string, 100)}
	if err := command.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.kill)
	go func() {
		scanner := bufio.NewScanner(output)
		for scanner.Scan() {
			m.lines <- scanner.Text()
		}
		close(m.lines)
	}()
	return m
}

// until is when the process handled id.
func (m *member) until(t *testing.T, id string) time.Time {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case line, open := <-m.lines:
			if !open {
				t.Fatalf("the consumer process exited before handling %s", id)
			}
			if line == "handled "+id {
				return time.Now()
			}
		case <-timeout:
			t.Fatalf("%s not handled within 90 s", id)
		}
	}
}

func (m *member) kill() {
	if m.command.ProcessState == nil {
		_ = m.command.Process.Kill()
		_ = m.command.Wait()
	}
}

// TestRestartMember is one consumer process of the test above (skipped on its own).
func TestRestartMember(t *testing.T) {
	spec := strings.Fields(os.Getenv("RMS_RESTART_MEMBER"))
	if len(spec) < 3 {
		t.Skip("a consumer process of TestAStaticMemberKilledAndStartedAgainGetsItsPartitionAtOnce")
	}
	env := live(t)
	instance := ""
	if len(spec) == 4 {
		instance = spec[3]
	}
	client, err := NewClient(env.url, spec[1])
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := NewInbox(env.db(t), "go_restart_inbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	consumer, err := NewConsumer(ConsumerConfig{App: spec[0], Brokers: []string{env.brokers},
		Topics: []string{spec[2]}, Inbox: inbox, InstanceID: instance,
		Acker: HTTPAcker{Client: client},
		Handler: func(_ context.Context, _ *sql.Tx, record *Record) error {
			fmt.Printf("handled %s\n", record.MessageID)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	_ = consumer.Run(context.Background())
}
