package route

import (
	"context"
	"errors"
	"fmt"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// DefaultVNodes is how many ring positions (virtual nodes) a machine
// holds unless told otherwise: the default of a real node
// (node.Config.VNodes, `swarmcrawl node --vnodes`) and of the simulator
// (sim.Config.VNodes, `swarmcrawl simulate --vnodes`), written here once
// because this is the one layer both run (the import rules keep the
// simulator away from p2p/node).
//
// The figure is issue 28's measurements: on 8 machines the busiest holds
// a median 1.53 times the mean number of hosts at V = 8 and 1.38 at
// V = 16; on 300 simulated machines the busiest holds 5.3 times the mean
// at V = 1, 3.1 at V = 8 and 2.4 at V = 16. With the positions of a
// machine sharing its maintenance, V = 16 costs about 1.5 to 1.7 times
// the ring and shard messages of V = 1 (docs/scale.md, "Shared
// maintenance"; docs/operations.md, "Virtual nodes"). Not 32, although
// it keeps the busiest of 8 machines within 1.5 times the mean for 95%
// of identity sets against 75% at 16: beyond 12 positions each sends
// its own heartbeats every 2.8 s, so they grow with V, and 8 processes
// on 2 cores used 4.2 times V = 1's CPU to crawl at 32 against 3.3 at
// 16. Placed rather than drawn (PlacePositions), 16 positions kept the
// busiest of 8 processes within 1.5 times the mean hosts in 9 runs of
// 10 (median 1.27) and within 1.21 times the mean share of the ring.
const DefaultVNodes = 16

// PlaceChoices is how many candidates each of a machine's further
// positions is chosen among (PlacePositions): with 4, the busiest of 8
// machines of 16 positions owns a median 1.20 times the mean share of
// the ring and at most 1.42 in 40 identity sets, against a median 1.35
// and 9 sets over 1.5 with positions drawn at random (p2p/ring
// TestPlaceEvensMachines). Candidate j of position i has the index
// i + j·V (CandidateIndex), so a machine of V positions uses indexes
// below 4·V, and the 64 positions a machine may hold stay below the 256
// indexes any peer accepts (p2p.MaxPositions).
const PlaceChoices = 4

// CandidateIndex is the position index of candidate j (0 to
// PlaceChoices-1) of position i (1 to v-1) of a machine of v positions.
func CandidateIndex(i, j, v int) int { return i + j*v }

// Probe looks up the arcs of the ring that hold keys
// (ring.Node.ArcAround), all at once: errs[i] is nil when arcs[i] is
// known. A peer runs the lookups in parallel; the simulator runs them in
// turn and charges the slowest.
type Probe func(ctx context.Context, keys []ring.ID) (arcs []ring.Arc, errs []error)

// PlacePositions chooses where a machine of v positions, whose first
// position is at first, puts positions 1 to v-1, each among
// PlaceChoices candidates (candidate makes the ring member of an index):
// probe looks every candidate's arc up at once, and ring.Choose takes,
// position after position, the best split, counting the positions
// chosen before. When no arc of a position's candidates is known, the
// position is the first candidate, where the identity alone puts it, and
// err says why.
func PlacePositions(ctx context.Context, first ring.ID, v int, candidate func(index int) ring.Peer, probe Probe) ([]ring.Peer, error) {
	if v <= 1 {
		return nil, nil
	}
	cands := make([][]ring.Peer, v)
	keys := make([]ring.ID, 0, (v-1)*PlaceChoices)
	for i := 1; i < v; i++ {
		cands[i] = make([]ring.Peer, PlaceChoices)
		for j := range cands[i] {
			cands[i][j] = candidate(CandidateIndex(i, j, v))
			keys = append(keys, cands[i][j].ID)
		}
	}
	arcs, errs := probe(ctx, keys)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("place positions: %w", err)
	}
	if len(arcs) != len(keys) || len(errs) != len(keys) {
		return nil, fmt.Errorf("place positions: %d arcs and %d errors for %d keys", len(arcs), len(errs), len(keys))
	}
	placed := []ring.ID{first}
	out := make([]ring.Peer, 0, v-1)
	var blind error
	for i := 1; i < v; i++ {
		at := (i - 1) * PlaceChoices
		known := make([]bool, PlaceChoices)
		for j := range known {
			known[j] = errs[at+j] == nil
		}
		p, ok := ring.Choose(cands[i], arcs[at:at+PlaceChoices], known, placed)
		if !ok && blind == nil {
			blind = fmt.Errorf("place position %d: no candidate's arc known: %w", i, errors.Join(errs[at:at+PlaceChoices]...))
		}
		placed, out = append(placed, p.ID), append(out, p)
	}
	return out, blind
}
