package rms

import (
	"context"
	"errors"
	"testing"
)

func TestRefusalsAreTypedErrors(t *testing.T) {
	env := live(t)
	_, client, topic := env.producerApp(t, "errors")
	ctx := context.Background()

	_, err := client.Get(ctx, "no-such-message")
	var notFound *NotFoundError
	if !errors.As(err, &notFound) || notFound.Status != 404 {
		t.Fatalf("unknown message: %v", err)
	}

	m, err := client.Prepare(ctx, Draft{Topic: topic, Payload: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Cancel(ctx, m.MessageID); err != nil {
		t.Fatal(err)
	}
	_, err = client.Confirm(ctx, m.MessageID)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.CurrentState != StateDeleted || conflict.PartOfTransaction() {
		t.Fatalf("confirm of a deleted message: %v (%+v)", err, conflict)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("a conflict is not an *APIError: %v", err)
	}

	_, err = client.Prepare(ctx, Draft{MessageID: m.MessageID, Topic: topic, Payload: 2})
	if !errors.As(err, &conflict) {
		t.Fatalf("an id reused with other content: %v", err)
	}

	tx, err := client.PrepareTransaction(ctx, TransactionDraft{
		Messages: []Draft{{Topic: topic, Payload: 1}, {Topic: topic, Payload: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Confirm(ctx, tx.Messages[1].MessageID)
	if !errors.As(err, &conflict) || !conflict.PartOfTransaction() ||
		conflict.TransactionID != tx.TransactionID || conflict.CurrentState != StatePendingSend {
		t.Fatalf("confirm of a transaction's message: %v (%+v)", err, conflict)
	}
	if _, err := client.CancelTransaction(ctx, tx.TransactionID); err != nil {
		t.Fatal(err)
	}

	_, err = client.Prepare(ctx, Draft{MessageID: "not/valid", Topic: topic, Payload: 1})
	var invalid *ValidationError
	if !errors.As(err, &invalid) || invalid.Status != 422 || invalid.Problem["errors"] == nil ||
		invalid.Detail == "" {
		t.Fatalf("an invalid id: %v (%+v)", err, invalid)
	}
	_, err = client.Prepare(ctx, Draft{Topic: topic, Payload: 1, Delay: 1,
		DeliverAfter: m.CreatedAt})
	if !errors.As(err, &invalid) {
		t.Fatalf("two delays at once: %v", err)
	}
}
