package crawl

import (
	"net/http"
	"testing"
	"time"
)

func TestRepeatedSegments(t *testing.T) {
	tests := []struct {
		url  string
		want int
	}{
		{"http://a.test/", 0},
		{"http://a.test/x", 1},
		{"http://a.test/a/b/c", 1},
		{"http://a.test/a/a/a", 3},
		{"http://a.test/a/a/a/a/", 4},
		{"http://a.test/a/b/a/b/a/b/a/b?a=a", 4},
		{"http://a.test/2026/01/2026/02/2026/03", 3},
	}
	for _, tt := range tests {
		if got := repeatedSegments(tt.url); got != tt.want {
			t.Errorf("repeatedSegments(%s) = %d, want %d", tt.url, got, tt.want)
		}
	}
	long := "http://a.test"
	for range 100 {
		long += "/x"
	}
	if got := repeatedSegments(long); got != 100 {
		t.Errorf("repeatedSegments of 100 x = %d", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"120", 2 * time.Minute},
		{" 7 ", 7 * time.Second},
		{"999999999999", time.Hour}, // capped
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0}, // in the past
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.v, now, time.Hour); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestBackoffFullJitter checks that retry n waits a random time below
// RetryBase·2^n, spread over the whole range.
func TestBackoffFullJitter(t *testing.T) {
	c := &Crawler{cfg: Config{RetryBase: 100 * time.Millisecond}}
	for attempt := range 4 {
		ceiling := 100 * time.Millisecond << attempt
		var lo, hi int
		for range 2000 {
			d := c.backoff(attempt)
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d: backoff %v outside [0, %v)", attempt, d, ceiling)
			}
			if d < ceiling/4 {
				lo++
			}
			if d >= 3*ceiling/4 {
				hi++
			}
		}
		if lo < 300 || hi < 300 {
			t.Errorf("attempt %d: %d waits in the lowest quarter, %d in the highest: not full jitter", attempt, lo, hi)
		}
	}
}

func TestNextInterval(t *testing.T) {
	c := &Crawler{cfg: Config{MinRecrawl: time.Hour, MaxRecrawl: 8 * time.Hour}}
	tests := []struct {
		prev           time.Duration
		first, changed bool
		want           time.Duration
	}{
		{0, true, true, time.Hour},
		{2 * time.Hour, false, false, 4 * time.Hour},
		{2 * time.Hour, false, true, time.Hour},
		{time.Hour, false, true, time.Hour},          // clamped at the minimum
		{6 * time.Hour, false, false, 8 * time.Hour}, // clamped at the maximum
	}
	for _, tt := range tests {
		if got := c.nextInterval(tt.prev, tt.first, tt.changed); got != tt.want {
			t.Errorf("nextInterval(%v, first %v, changed %v) = %v, want %v", tt.prev, tt.first, tt.changed, got, tt.want)
		}
	}
}
