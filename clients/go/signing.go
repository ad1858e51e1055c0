package rms

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// DefaultTolerance is how far a check-back's webhook-timestamp may be from the local clock.
const DefaultTolerance = 5 * time.Minute

// Standard Webhooks header names, used by check-backs (HTTP) and ack records (Kafka).
const (
	HeaderWebhookID        = standardwebhooks.HeaderWebhookID
	HeaderWebhookTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderWebhookSignature = standardwebhooks.HeaderWebhookSignature
)

// SignatureError means a request is not provably RMS's: headers missing, no signature
// matching a known secret, or a timestamp outside the tolerance (Stale).
type SignatureError struct {
	Reason string
	Stale  bool
}

func (e *SignatureError) Error() string { return "rms: " + e.Reason }

// Verifier checks Standard Webhooks signatures (the official Go library) against any of
// several signing secrets, so both sides of a secret rotation are accepted, with a
// timestamp tolerance of its own.
type Verifier struct {
	webhooks  []*standardwebhooks.Webhook
	tolerance time.Duration
	now       func() time.Time
}

// NewVerifier takes the app's "whsec_..." signing secrets (current first) and a tolerance
// (zero means [DefaultTolerance]).
func NewVerifier(secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("rms: at least one signing secret is needed")
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	v := &Verifier{tolerance: tolerance, now: time.Now}
	for _, secret := range secrets {
		webhook, err := newWebhook(secret)
		if err != nil {
			return nil, err
		}
		v.webhooks = append(v.webhooks, webhook)
	}
	return v, nil
}

// Verify returns the verified webhook-id and timestamp of a signed body, or a
// *SignatureError. Header names are matched in any case.
func (v *Verifier) Verify(given map[string][]string, body []byte) (id string, at time.Time, err error) {
	headers := canonicalHeaders(given)
	id = headers.Get(HeaderWebhookID)
	stamp := headers.Get(HeaderWebhookTimestamp)
	if id == "" || stamp == "" || headers.Get(HeaderWebhookSignature) == "" {
		return "", time.Time{}, &SignatureError{Reason: "missing webhook-id, webhook-timestamp " +
			"or webhook-signature header"}
	}
	seconds, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return "", time.Time{}, &SignatureError{Reason: fmt.Sprintf(
			"webhook-timestamp %q is not unix seconds", stamp)}
	}
	at = time.Unix(seconds, 0)
	if skew := v.now().Sub(at); math.Abs(float64(skew)) > float64(v.tolerance) {
		return "", time.Time{}, &SignatureError{Stale: true, Reason: fmt.Sprintf(
			"webhook-timestamp %d is outside the %s tolerance", seconds, v.tolerance)}
	}
	for _, webhook := range v.webhooks {
		// the tolerance is checked above (the library's own is fixed at five minutes)
		if webhook.VerifyIgnoringTimestamp(body, headers) == nil {
			return id, at, nil
		}
	}
	return "", time.Time{}, &SignatureError{Reason: "no webhook-signature matches a known " +
		"signing secret"}
}

// Sign is the webhook-signature value ("v1,<base64>") of body under secret.
func Sign(secret, id string, at time.Time, body []byte) (string, error) {
	webhook, err := newWebhook(secret)
	if err != nil {
		return "", err
	}
	return webhook.Sign(id, at, body)
}

// newWebhook checks the secret's form (the library accepts an empty key).
func newWebhook(secret string) (*standardwebhooks.Webhook, error) {
	if strings.TrimPrefix(secret, "whsec_") == "" {
		return nil, errors.New("rms: a signing secret is 'whsec_' followed by base64")
	}
	webhook, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, errors.New("rms: a signing secret is 'whsec_' followed by base64")
	}
	return webhook, nil
}
