package ring

import (
	"testing"
	"time"
)

func TestFakeClockTicker(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFakeClock(start)
	tk := c.NewTicker(time.Second)
	if c.Tickers() != 1 {
		t.Fatalf("Tickers = %d", c.Tickers())
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-tk.C():
		t.Fatal("ticked early")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-tk.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("tick at %v", got)
	}
	// An unread tick is kept, later ones are dropped, and a long jump
	// delivers only the latest due tick.
	c.Advance(time.Second)
	c.Advance(time.Second)
	if c.PendingTicks() != 1 {
		t.Fatalf("PendingTicks = %d", c.PendingTicks())
	}
	if got := <-tk.C(); !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("kept tick at %v", got)
	}
	c.Advance(time.Hour)
	if got := <-tk.C(); !got.Equal(start.Add(3*time.Second + time.Hour)) {
		t.Fatalf("tick after long jump at %v", got)
	}
	if got := c.Now(); !got.Equal(start.Add(3*time.Second + time.Hour)) {
		t.Fatalf("Now = %v", got)
	}
	tk.Stop()
	c.Advance(time.Hour)
	select {
	case <-tk.C():
		t.Fatal("stopped ticker ticked")
	default:
	}
	if c.Tickers() != 0 {
		t.Fatalf("Tickers after Stop = %d", c.Tickers())
	}
}

func TestRealClock(t *testing.T) {
	c := RealClock()
	if time.Since(c.Now()) > time.Minute {
		t.Fatal("RealClock.Now far from time.Now")
	}
	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Stop()
}
