package rms

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		wait  time.Duration
		ok    bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"Thu, 26 Nov 2026 08:00:07 GMT", 7 * time.Second, true},
		{"Thu, 26 Nov 2026 07:59:00 GMT", 0, true}, // in the past: at once
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, c := range cases {
		wait, ok := ParseRetryAfter(c.value, now)
		if wait != c.wait || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.value, wait, ok, c.wait, c.ok)
		}
	}
}

func TestBackoffDoublesWithJitterAndIsCapped(t *testing.T) {
	policy := RetryPolicy{Attempts: 10, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for attempt, ceiling := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		5: time.Second, 60: time.Second,
	} {
		for range 50 {
			wait := policy.delay(attempt)
			if wait < ceiling/2 || wait > ceiling {
				t.Fatalf("attempt %d: wait %v outside [%v, %v]", attempt, wait, ceiling/2, ceiling)
			}
		}
	}
}
