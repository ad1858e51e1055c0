package rms

import (
	"context"
	"errors"
	"log/slog"
)

// Prepare stores d as a pending-send message: it is not delivered until confirmed (by
// [Client.Confirm], or by the check-back when the producer did not live to confirm).
func (c *Client) Prepare(ctx context.Context, d Draft) (*Message, error) {
	var m Message
	err := c.call(ctx, "POST", "/v1/messages", d.body(orNewID(d.MessageID), c.defaultCheckURL), &m)
	return result(&m, err)
}

// Send is the one-shot prepare and confirm, for a message outside any local transaction.
func (c *Client) Send(ctx context.Context, d Draft) (*Message, error) {
	var m Message
	err := c.call(ctx, "POST", "/v1/messages/send",
		d.body(orNewID(d.MessageID), c.defaultCheckURL), &m)
	return result(&m, err)
}

// Confirm makes a pending-send message sent (idempotent). A deleted message is a
// *ConflictError; so is a message of a transaction (PartOfTransaction).
func (c *Client) Confirm(ctx context.Context, messageID string) (*Message, error) {
	return c.message(ctx, "POST", "/v1/messages/"+escape(messageID)+"/confirm")
}

// Cancel deletes a pending-send message (idempotent); a sent or done one is a
// *ConflictError.
func (c *Client) Cancel(ctx context.Context, messageID string) (*Message, error) {
	return c.message(ctx, "POST", "/v1/messages/"+escape(messageID)+"/cancel")
}

// Get reads a message of this app.
func (c *Client) Get(ctx context.Context, messageID string) (*Message, error) {
	return c.message(ctx, "GET", "/v1/messages/"+escape(messageID))
}

// Events reads a message's history.
func (c *Client) Events(ctx context.Context, messageID string) ([]Event, error) {
	var answer struct {
		Events []Event `json:"events"`
	}
	if err := c.call(ctx, "GET", "/v1/messages/"+escape(messageID)+"/events", nil,
		&answer); err != nil {
		return nil, err
	}
	return answer.Events, nil
}

// Ack acknowledges a message this app consumed (the consumer's HTTP ack): sent becomes
// done (idempotent). See also [HTTPAcker] and [TopicAcker].
func (c *Client) Ack(ctx context.Context, messageID string) (*Message, error) {
	return c.message(ctx, "POST", "/v1/messages/"+escape(messageID)+"/ack")
}

// PrepareBatch prepares many messages in one request, all or nothing.
func (c *Client) PrepareBatch(ctx context.Context, drafts []Draft) ([]Message, error) {
	items := make([]map[string]any, len(drafts))
	for i, d := range drafts {
		items[i] = d.body(orNewID(d.MessageID), c.defaultCheckURL)
	}
	return c.batch(ctx, "/v1/messages/batch", map[string]any{"messages": items})
}

// ConfirmBatch confirms many messages in one request, all or nothing.
func (c *Client) ConfirmBatch(ctx context.Context, messageIDs []string) ([]Message, error) {
	return c.batch(ctx, "/v1/messages/batch/confirm", map[string]any{"message_ids": messageIDs})
}

// CancelBatch cancels many messages in one request, all or nothing.
func (c *Client) CancelBatch(ctx context.Context, messageIDs []string) ([]Message, error) {
	return c.batch(ctx, "/v1/messages/batch/cancel", map[string]any{"message_ids": messageIDs})
}

// PrepareTransaction stores a pending transaction of several messages: published in their
// order once confirmed, none of them if cancelled. Ids are fixed before the first attempt,
// so a retry is answered with the stored transaction.
func (c *Client) PrepareTransaction(ctx context.Context, t TransactionDraft) (*Transaction, error) {
	items := make([]map[string]any, len(t.Messages))
	for i, d := range t.Messages {
		if err := d.checkBackFields(); err != nil {
			return nil, err
		}
		items[i] = d.memberBody(orNewID(d.MessageID))
	}
	body := map[string]any{"transaction_id": orNewID(t.TransactionID), "messages": items}
	putCheckBack(body, t.CheckURL, c.defaultCheckURL, t.CheckAfter, t.MaxChecks)
	var tx Transaction
	err := c.call(ctx, "POST", "/v1/transactions", body, &tx)
	return result(&tx, err)
}

// ConfirmTransaction confirms every message of the transaction at once (idempotent).
func (c *Client) ConfirmTransaction(ctx context.Context, transactionID string) (*Transaction, error) {
	return c.transaction(ctx, "POST", "/v1/transactions/"+escape(transactionID)+"/confirm")
}

// CancelTransaction cancels every message of the transaction at once (idempotent).
func (c *Client) CancelTransaction(ctx context.Context, transactionID string) (*Transaction, error) {
	return c.transaction(ctx, "POST", "/v1/transactions/"+escape(transactionID)+"/cancel")
}

// GetTransaction reads a transaction of this app.
func (c *Client) GetTransaction(ctx context.Context, transactionID string) (*Transaction, error) {
	return c.transaction(ctx, "GET", "/v1/transactions/"+escape(transactionID))
}

// Transactional runs the reliable-message pattern for one message: prepare d, run local
// (the caller's local transaction, committed inside it, ideally marked with
// [Barrier.MarkCommitted]), then confirm; when local returns an error, cancel instead and
// return that error. If RMS cannot be reached for the confirm, the local work stands and
// the check-back confirms later, so no error is returned; a confirm RMS refuses (the
// check-back already rolled the message back) is returned, since the local commit and the
// message then disagree. A panic in local sends nothing: the check-back resolves it.
func (c *Client) Transactional(ctx context.Context, d Draft,
	local func(ctx context.Context, m *Message) error) (*Message, error) {
	m, err := c.Prepare(ctx, d)
	if err != nil {
		return nil, err
	}
	if err := local(ctx, m); err != nil {
		if _, cancelErr := c.Cancel(ctx, m.MessageID); cancelErr != nil {
			slog.WarnContext(ctx, "rms: cancel failed; the check-back will resolve the message",
				"message_id", m.MessageID, "error", cancelErr)
		}
		return m, err
	}
	confirmed, err := c.Confirm(ctx, m.MessageID)
	if deferred(ctx, err, "message_id", m.MessageID) {
		return m, nil
	}
	return result(confirmed, err)
}

// InTransaction is [Client.Transactional] for a transaction of several messages: prepare
// them all, run local (marked with the transaction id), then confirm them all at once, or
// cancel them all when local returns an error.
func (c *Client) InTransaction(ctx context.Context, t TransactionDraft,
	local func(ctx context.Context, tx *Transaction) error) (*Transaction, error) {
	tx, err := c.PrepareTransaction(ctx, t)
	if err != nil {
		return nil, err
	}
	if err := local(ctx, tx); err != nil {
		if _, cancelErr := c.CancelTransaction(ctx, tx.TransactionID); cancelErr != nil {
			slog.WarnContext(ctx, "rms: cancel failed; the check-back will resolve the "+
				"transaction", "transaction_id", tx.TransactionID, "error", cancelErr)
		}
		return tx, err
	}
	confirmed, err := c.ConfirmTransaction(ctx, tx.TransactionID)
	if deferred(ctx, err, "transaction_id", tx.TransactionID) {
		return tx, nil
	}
	return result(confirmed, err)
}

// deferred tells whether a confirm failed only because RMS was unreachable, which the
// check-back makes good (logged, not an error).
func deferred(ctx context.Context, err error, name, id string) bool {
	var unavailable *UnavailableError
	if err == nil || !errors.As(err, &unavailable) {
		return false
	}
	slog.WarnContext(ctx, "rms: confirm deferred to the check-back", name, id, "error", err)
	return true
}

func (c *Client) message(ctx context.Context, method, path string) (*Message, error) {
	var m Message
	return result(&m, c.call(ctx, method, path, nil, &m))
}

func (c *Client) transaction(ctx context.Context, method, path string) (*Transaction, error) {
	var tx Transaction
	return result(&tx, c.call(ctx, method, path, nil, &tx))
}

func (c *Client) batch(ctx context.Context, path string, body any) ([]Message, error) {
	var answer struct {
		Messages []Message `json:"messages"`
	}
	if err := c.call(ctx, "POST", path, body, &answer); err != nil {
		return nil, err
	}
	return answer.Messages, nil
}

func result[T any](value *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return value, nil
}
