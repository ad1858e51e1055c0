package rms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// DefaultBarrierTable is the barrier's table name.
const DefaultBarrierTable = "rms_barrier"

const lockNotAvailable = "55P03" // PostgreSQL: lock_timeout expired

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ErrBarrierClosed means the check-back already answered rolled_back for this id: the
// local transaction must roll back (RMS has deleted the message; it is never delivered).
var ErrBarrierClosed = errors.New("rms: already resolved as rolled back by the check-back; " +
	"this transaction must not commit")

// ErrBarrierUsed means an earlier local transaction already committed with this id: ids
// must not be reused.
var ErrBarrierUsed = errors.New("rms: an earlier local transaction already committed with " +
	"this id")

// Barrier is the local-transaction marker (DTM's idea) that lets a check-back tell "still
// running" from "rolled back", on database/sql with PostgreSQL.
//
// The local transaction first inserts (id, 'committed') with [Barrier.MarkCommitted]. The
// check-back ([Barrier.Check]) inserts (id, 'rolled_back') unless a row is there:
//
//   - the local transaction committed: its row is there, the answer is committed;
//   - it is still open: the insert waits on its uncommitted row, then answers what happened;
//   - it rolled back or never started (the producer died after prepare): the insert wins,
//     the answer is rolled_back and stays true, since a late local transaction's own mark
//     now fails with [ErrBarrierClosed].
//
// A wait longer than the lock timeout answers unknown (RMS asks again later). Message and
// transaction ids share the table, so keep them distinct.
type Barrier struct {
	db          *sql.DB
	table       string
	lockTimeout time.Duration
}

// BarrierOption configures a [Barrier].
type BarrierOption func(*Barrier)

// WithBarrierTable names the barrier's table (lower-case letters, digits, underscores).
func WithBarrierTable(name string) BarrierOption { return func(b *Barrier) { b.table = name } }

// WithLockTimeout bounds how long a check-back waits for an open local transaction
// (default 10 s).
func WithLockTimeout(timeout time.Duration) BarrierOption {
	return func(b *Barrier) { b.lockTimeout = timeout }
}

// NewBarrier is a barrier in db, the producer's own PostgreSQL database.
func NewBarrier(db *sql.DB, options ...BarrierOption) (*Barrier, error) {
	b := &Barrier{db: db, table: DefaultBarrierTable, lockTimeout: 10 * time.Second}
	for _, option := range options {
		option(b)
	}
	if !tableName.MatchString(b.table) {
		return nil, fmt.Errorf("rms: barrier table name %q must match %s", b.table, tableName)
	}
	if b.lockTimeout < time.Millisecond {
		return nil, errors.New("rms: the barrier's lock timeout must be at least 1 ms")
	}
	return b, nil
}

// CreateTable creates the barrier table if it is missing (or add the same table to your
// migrations).
func (b *Barrier) CreateTable(ctx context.Context) error {
	_, err := b.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+b.table+` (
		message_id text PRIMARY KEY,
		outcome text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now())`)
	return err
}

// MarkCommitted marks tx, the local transaction, as the one of id (a message id, or a
// transaction id for a transaction of several messages). Call it first in tx, so that a
// concurrent check-back waits for tx's outcome. It returns [ErrBarrierClosed] when the
// check-back already said rolled_back: roll tx back then.
func (b *Barrier) MarkCommitted(ctx context.Context, tx *sql.Tx, id string) error {
	var marked string
	err := tx.QueryRowContext(ctx, `INSERT INTO `+b.table+` (message_id, outcome)
		VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING RETURNING outcome`,
		id, string(Committed)).Scan(&marked)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var outcome string
	if err := tx.QueryRowContext(ctx, `SELECT outcome FROM `+b.table+` WHERE message_id = $1`,
		id).Scan(&outcome); err != nil {
		return err
	}
	if outcome == string(Committed) {
		return fmt.Errorf("%w (id %q)", ErrBarrierUsed, id)
	}
	return fmt.Errorf("%w (id %q)", ErrBarrierClosed, id)
}

// Check is the outcome of id's local transaction, waiting while it is open.
func (b *Barrier) Check(ctx context.Context, id string) (CheckStatus, error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return Unknown, err
	}
	defer func() { _ = tx.Rollback() }()
	status, err := b.settle(ctx, tx, id)
	if err != nil {
		if sqlState(err) == lockNotAvailable {
			return Unknown, nil
		}
		return Unknown, err
	}
	return status, tx.Commit()
}

// Resolve is a [Resolver] for [NewCheckBack].
func (b *Barrier) Resolve(ctx context.Context, check CheckRequest) (CheckStatus, error) {
	return b.Check(ctx, check.MessageID)
}

// ResolveTransaction is a [TransactionResolver] for [WithTransactionResolver]: the local
// transaction marked with the transaction id.
func (b *Barrier) ResolveTransaction(ctx context.Context, check TransactionCheckRequest,
) (CheckStatus, error) {
	return b.Check(ctx, check.TransactionID)
}

func (b *Barrier) settle(ctx context.Context, tx *sql.Tx, id string) (CheckStatus, error) {
	millis := max(b.lockTimeout.Milliseconds(), 1)
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", millis)); err != nil {
		return Unknown, err
	}
	var closed string
	err := tx.QueryRowContext(ctx, `INSERT INTO `+b.table+` (message_id, outcome)
		VALUES ($1, $2) ON CONFLICT (message_id) DO NOTHING RETURNING outcome`,
		id, string(RolledBack)).Scan(&closed)
	if err == nil {
		return RolledBack, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Unknown, err
	}
	// a new statement, so a new snapshot (read committed): it sees the row whose
	// transaction the insert above waited for
	var outcome string
	if err := tx.QueryRowContext(ctx, `SELECT outcome FROM `+b.table+` WHERE message_id = $1`,
		id).Scan(&outcome); err != nil {
		return Unknown, err
	}
	switch CheckStatus(outcome) {
	case Committed, RolledBack:
		return CheckStatus(outcome), nil
	}
	return Unknown, nil
}

// sqlState is the SQLSTATE of a driver error (pgx's *pgconn.PgError and lib/pq's *Error
// both have a SQLState method), or "".
func sqlState(err error) string {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return coded.SQLState()
	}
	return ""
}
