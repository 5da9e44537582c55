package p2p_test

import (
	"context"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

// BenchmarkGenerateIdentity is what an honest node pays, once per data
// dir, for the default ring work, on every core of the machine.
func BenchmarkGenerateIdentity(b *testing.B) {
	for b.Loop() {
		if _, err := p2p.GenerateIdentity(context.Background(), p2p.DefaultRingWork); err != nil {
			b.Fatal(err)
		}
	}
}
