package rms

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func secretOf(raw string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(raw))
}

func signedHeaders(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	signature, err := Sign(secret, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderWebhookSignature, signature)
	return h
}

func TestVerifierAcceptsEitherSecretOfARotation(t *testing.T) {
	old, current := secretOf("old secret"), secretOf("current secret")
	verifier, err := NewVerifier([]string{current, old}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"message_id":"m1"}`)
	for _, secret := range []string{old, current} {
		id, _, err := verifier.Verify(signedHeaders(t, secret, "msg_m1_1", time.Now(), body), body)
		if err != nil || id != "msg_m1_1" {
			t.Fatalf("signed with a known secret: id %q, err %v", id, err)
		}
	}
}

func TestVerifierRefusesForgedTamperedStaleAndUnsigned(t *testing.T) {
	secret := secretOf("the app's secret")
	verifier, err := NewVerifier([]string{secret}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"message_id":"m1"}`)
	cases := map[string]struct {
		headers http.Header
		body    []byte
		stale   bool
	}{
		"forged":   {signedHeaders(t, secretOf("another secret"), "id", time.Now(), body), body, false},
		"tampered": {signedHeaders(t, secret, "id", time.Now(), body), []byte(`{"message_id":"m2"}`), false},
		"stale":    {signedHeaders(t, secret, "id", time.Now().Add(-2*time.Minute), body), body, true},
		"future":   {signedHeaders(t, secret, "id", time.Now().Add(2*time.Minute), body), body, true},
		"unsigned": {http.Header{}, body, false},
	}
	for name, c := range cases {
		_, _, err := verifier.Verify(c.headers, c.body)
		var signatureErr *SignatureError
		if !errors.As(err, &signatureErr) {
			t.Fatalf("%s: want a *SignatureError, got %v", name, err)
		}
		if signatureErr.Stale != c.stale {
			t.Fatalf("%s: Stale = %v, want %v (%v)", name, signatureErr.Stale, c.stale, err)
		}
	}
}

func TestMalformedSecretsAreRefusedUpFront(t *testing.T) {
	for _, secret := range []string{"", "whsec_", "whsec_not base64!"} {
		if _, err := NewVerifier([]string{secret}, 0); err == nil {
			t.Fatalf("secret %q accepted", secret)
		}
	}
	if _, err := NewVerifier(nil, 0); err == nil {
		t.Fatal("no secret accepted")
	}
}
