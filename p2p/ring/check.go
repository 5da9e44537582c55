package ring

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// OwnerOf returns the member that owns key under consistent hashing: the
// first one clockwise at or after key. It is the ground truth that lookups
// are checked against. It returns the zero Peer if members is empty.
func OwnerOf(members []Peer, key ID) Peer {
	var best Peer
	var bestDist uint64
	for _, m := range members {
		if d := key.dist(m.ID); best.IsZero() || d < bestDist {
			best, bestDist = m, d
		}
	}
	return best
}

// CheckRing verifies the ring invariants over nodes, which must be exactly
// the live members of one ring: every node's predecessor and successor list
// match the sorted membership. It returns nil when the ring has converged,
// otherwise an error listing each violation.
func CheckRing(nodes []*Node) error {
	var errs []error
	violations(nodes, func(v error) bool {
		errs = append(errs, v)
		return true
	})
	return errors.Join(errs...)
}

// FirstViolation is CheckRing's first line: the first violation it would
// list, or nil, found without describing the others (at 160,000 positions
// a ring still forming has thousands).
func FirstViolation(nodes []*Node) error {
	var first error
	violations(nodes, func(v error) bool {
		first = v
		return false
	})
	return first
}

// Converged reports whether CheckRing(nodes) would return nil, stopping
// at the first violation, for loops that poll a ring until it converges:
// formatting every violation of a ring still forming was 90% of such a
// test's CPU.
func Converged(nodes []*Node) bool { return FirstViolation(nodes) == nil }

// violations checks every node of nodes against the sorted membership
// and reports each wrong successor list or predecessor, described, until
// report returns false.
func violations(nodes []*Node, report func(error) bool) {
	members, pos := ringOrder(nodes)
	var truth []Peer
	for _, n := range nodes {
		st := n.State()
		i, total := pos[st.Self], len(members)
		want := []Peer{st.Self}
		wantPred := Peer{}
		if total > 1 {
			// The list the node's own rule builds from the true
			// successors (buildSuccessorsLocked), which reads no more
			// than SuccessorListLen of them: all of them made the check
			// quadratic (17% of a 32,000-position simulation's CPU).
			truth = truth[:0]
			for k := 1; k < total && k <= n.cfg.SuccessorListLen; k++ {
				truth = append(truth, members[(i+k)%total])
			}
			n.mu.Lock()
			want = n.buildSuccessorsLocked(truth)
			n.mu.Unlock()
			wantPred = members[(i+total-1)%total]
		}
		if !slices.Equal(st.Successors, want) && !report(fmt.Errorf("%s: successors %v, want %v", st.Self, st.Successors, want)) {
			return
		}
		if st.Predecessor != wantPred && !report(fmt.Errorf("%s: predecessor %s, want %s", st.Self, st.Predecessor, wantPred)) {
			return
		}
	}
}

// ringOrder returns the nodes' peers in ring order and each one's index
// in it.
func ringOrder(nodes []*Node) ([]Peer, map[Peer]int) {
	members := make([]Peer, len(nodes))
	for i, n := range nodes {
		members[i] = n.Self()
	}
	slices.SortFunc(members, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	pos := make(map[Peer]int, len(members))
	for i, m := range members {
		pos[m] = i
	}
	return members, pos
}
