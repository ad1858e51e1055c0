// Check-back server on Go's net/http; verifies RMS's signature with
// github.com/standard-webhooks/standard-webhooks/libraries/go.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const body = `{"status": "committed"}`

func main() {
	webhook, err := standardwebhooks.NewWebhook(os.Getenv("SIGNING_SECRET"))
	if err != nil {
		panic(err)
	}
	calls := os.Getenv("CALLS_FILE")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, _ := io.ReadAll(r.Body)
		f, _ := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.WriteString("call\n")
		f.Close()
		if err := webhook.Verify(payload, r.Header); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		answer(w, strings.TrimPrefix(r.URL.Path, "/"))
	})
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("LISTENING %d\n", listener.Addr().(*net.TCPAddr).Port)
	http.Serve(listener, handler)
}

func answer(w http.ResponseWriter, mode string) {
	switch mode {
	case "continue":
		w.WriteHeader(http.StatusContinue)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, body)
	case "chunked":
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, body[:5])
		w.(http.Flusher).Flush()
		io.WriteString(w, body[5:])
	case "close": // net/http always frames HTTP/1.1 answers: the hijacked connection does not
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
		buf.Flush()
		conn.Close()
	default:
		if mode == "connection-close" {
			w.Header().Set("Connection", "close")
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body)
	}
}
