package rms

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

func barrierIn(t *testing.T, table string, lockTimeout time.Duration) (*sql.DB, *Barrier) {
	t.Helper()
	db := live(t).db(t)
	barrier, err := NewBarrier(db, WithBarrierTable(table), WithLockTimeout(lockTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if err := barrier.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, barrier
}

// checkWhileOpen marks id in an open local transaction, starts a check, ends the local
// transaction with finish after a pause, and returns what the check answered and how long
// it waited.
func checkWhileOpen(t *testing.T, db *sql.DB, barrier *Barrier, id string,
	finish func(*sql.Tx) error) (CheckStatus, time.Duration) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := barrier.MarkCommitted(ctx, tx, id); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status CheckStatus
		err    error
	}
	answers := make(chan answer, 1)
	started := time.Now()
	go func() {
		status, err := barrier.Check(ctx, id)
		answers <- answer{status, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := finish(tx); err != nil {
		t.Fatal(err)
	}
	got := <-answers
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.status, time.Since(started)
}

func TestTheBarrierWaitsForAnOpenLocalTransaction(t *testing.T) {
	db, barrier := barrierIn(t, "go_barrier_wait", 5*time.Second)
	id := NewID()
	status, waited := checkWhileOpen(t, db, barrier, id, (*sql.Tx).Commit)
	if status != Committed || waited < 300*time.Millisecond {
		t.Fatalf("a check during a transaction that commits: %s after %v", status, waited)
	}
	other := NewID()
	status, _ = checkWhileOpen(t, db, barrier, other, (*sql.Tx).Rollback)
	if status != RolledBack {
		t.Fatalf("a check during a transaction that rolls back: %s", status)
	}
	// the rolled-back answer stays true: a late local transaction cannot commit
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := barrier.MarkCommitted(ctx, tx, other); !errors.Is(err, ErrBarrierClosed) {
		t.Fatalf("a late mark after rolled_back: %v", err)
	}
	if status, err := barrier.Check(ctx, other); status != RolledBack || err != nil {
		t.Fatalf("asked again: %s, %v", status, err)
	}
}

func TestTheBarrierAnswersUnknownAfterItsLockTimeout(t *testing.T) {
	db, barrier := barrierIn(t, "go_barrier_timeout", 100*time.Millisecond)
	status, _ := checkWhileOpen(t, db, barrier, NewID(), (*sql.Tx).Commit)
	if status != Unknown {
		t.Fatalf("a check that outwaited its lock timeout: %s", status)
	}
}

func TestAMarkCannotBeReused(t *testing.T) {
	db, barrier := barrierIn(t, "go_barrier_reuse", time.Second)
	ctx := context.Background()
	id := NewID()
	for attempt, want := range []error{nil, ErrBarrierUsed} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = barrier.MarkCommitted(ctx, tx, id)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("mark %d: %v, want %v", attempt+1, err, want)
		}
		if err := tx.Commit(); err != nil && want == nil {
			t.Fatal(err)
		}
	}
}

func TestAFailedHandlerLeavesNoInboxRow(t *testing.T) {
	db := live(t).db(t)
	ctx := context.Background()
	inbox, err := NewInbox(db, "go_inbox_failures")
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	record := &Record{MessageID: NewID(), Topic: "t", Delivery: 1}
	failure := errors.New("downstream refused")
	runs := 0
	handler := func(context.Context, *sql.Tx, *Record) error {
		runs++
		if runs == 1 {
			return failure
		}
		return nil
	}
	for i, want := range []Outcome{Failed, Processed, Duplicate} {
		outcome, err := inbox.Process(ctx, record, handler)
		if outcome != want || (want == Failed) != errors.Is(err, failure) {
			t.Fatalf("delivery %d: %s, %v; want %s", i+1, outcome, err, want)
		}
	}
	if runs != 2 {
		t.Fatalf("the handler ran %d times", runs)
	}
	if _, err := NewInbox(db, "Robert'); DROP TABLE x;--"); err == nil {
		t.Fatal("an unsafe table name was accepted")
	}
}
