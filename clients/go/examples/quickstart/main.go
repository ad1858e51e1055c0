// Quickstart: a producer sends one order message the reliable way (prepare, local commit,
// confirm) and reads it back. Environment: RMS_URL, RMS_API_KEY, RMS_TOPIC and
// RMS_CHECK_URL (a check URL the app may use).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	rms "github.com/rms-dev/rms/clients/go"
)

func main() {
	client, err := rms.NewClient(os.Getenv("RMS_URL"), os.Getenv("RMS_API_KEY"),
		rms.WithDefaultCheckURL(os.Getenv("RMS_CHECK_URL")))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	draft := rms.Draft{Topic: os.Getenv("RMS_TOPIC"), Key: "order-42",
		Payload: map[string]any{"order": 42, "total": "19.90"}}
	m, err := client.Transactional(ctx, draft, func(ctx context.Context, m *rms.Message) error {
		fmt.Printf("prepared %s: %s\n", m.MessageID, m.State)
		return nil // the local transaction commits here (mark it with Barrier.MarkCommitted)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("confirmed %s: %s, delivery %d\n", m.MessageID, m.State, m.DeliveryCount)
	_, err = client.Cancel(ctx, m.MessageID)
	var conflict *rms.ConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("cancel refused: %d, current state %s\n", conflict.Status, conflict.CurrentState)
	}
}
