package rms

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestEveryRequestNamesTheLibraryAndItsReleaseAsUserAgent(t *testing.T) {
	agents := make(chan string, 1)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.UserAgent()
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"title":"Not Found","status":404}`))
	}))
	defer server.Close()
	client, err := NewClient(server.URL, "key")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.Get(context.Background(), "order-1-paid")
	if got, want := <-agents, "rms-client-go/"+Version; got != want {
		t.Fatalf("User-Agent %q, want %q", got, want)
	}
}
