package ring

import (
	"math"
	"strings"
	"testing"
)

func TestBetween(t *testing.T) {
	const max = math.MaxUint64
	tests := []struct {
		name       string
		id, lo, hi ID
		want       bool
	}{
		{"inside", 5, 1, 10, true},
		{"at hi is included", 10, 1, 10, true},
		{"at lo is excluded", 1, 1, 10, false},
		{"below lo", 0, 1, 10, false},
		{"above hi", 11, 1, 10, false},
		{"wrap: above lo", max, max - 5, 3, true},
		{"wrap: zero", 0, max - 5, 3, true},
		{"wrap: at hi", 3, max - 5, 3, true},
		{"wrap: at lo", max - 5, max - 5, 3, false},
		{"wrap: in the gap", 100, max - 5, 3, false},
		{"lo == hi is the whole ring", 42, 7, 7, true},
		{"lo == hi includes lo itself", 7, 7, 7, true},
		{"adjacent arc holds only hi", 8, 7, 8, true},
		{"adjacent arc excludes the rest", 9, 7, 8, false},
		{"arc of all but one point", 5, 5, 4, false},
		{"arc of all but one point, member", 4, 5, 4, true},
		{"full-width values", max, 0, max, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.Between(tt.lo, tt.hi); got != tt.want {
				t.Fatalf("%d.Between(%d, %d) = %v, want %v", tt.id, tt.lo, tt.hi, got, tt.want)
			}
		})
	}
}

func TestInOpen(t *testing.T) {
	tests := []struct {
		id, lo, hi ID
		want       bool
	}{
		{5, 1, 10, true},
		{10, 1, 10, false}, // hi excluded
		{1, 1, 10, false},  // lo excluded
		{9, 7, 7, true},    // lo == hi: everything but that point
		{7, 7, 7, false},
		{0, math.MaxUint64, 1, true},
	}
	for _, tt := range tests {
		if got := tt.id.inOpen(tt.lo, tt.hi); got != tt.want {
			t.Errorf("%d.inOpen(%d, %d) = %v, want %v", tt.id, tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestIDAndPeerStrings(t *testing.T) {
	if got := ID(0xab).String(); got != "00000000000000ab" {
		t.Errorf("ID.String = %q", got)
	}
	if got := (Peer{ID: 1, Addr: "a"}).String(); got != "a@0000000000000001" {
		t.Errorf("Peer.String = %q", got)
	}
	if !(Peer{}).IsZero() || (Peer{Addr: "a"}).IsZero() || (Peer{ID: 1}).IsZero() {
		t.Error("IsZero wrong")
	}
	// Pinned: other packages and other nodes must place keys identically.
	if got := HashID([]byte("example.com")); got != 0xa379a6f6eeafb9a5 {
		t.Errorf("HashID(example.com) = %s", got)
	}
}

func TestOwnerOf(t *testing.T) {
	members := []Peer{{ID: 12, Addr: "a"}, {ID: 27, Addr: "b"}, {ID: 52, Addr: "c"}, {ID: 70, Addr: "d"}, {ID: 91, Addr: "e"}}
	tests := []struct {
		key  ID
		want string
	}{
		{63, "d"}, {70, "d"}, {71, "e"}, {0, "a"}, {92, "a"}, {math.MaxUint64, "a"}, {12, "a"}, {13, "b"},
	}
	for _, tt := range tests {
		if got := OwnerOf(members, tt.key); got.Addr != tt.want {
			t.Errorf("OwnerOf(%d) = %s, want %s", tt.key, got.Addr, tt.want)
		}
	}
	if !OwnerOf(nil, 5).IsZero() {
		t.Error("OwnerOf(nil) not zero")
	}
}

func TestCheckRingDetectsBrokenPointers(t *testing.T) {
	c := newCluster(t, 5, 3, nil)
	c.joinAll(t.Context(), 1, false)
	c.converge(t.Context(), 10, false)
	if !Converged(c.nodes) || CheckRing(c.nodes) != nil {
		t.Fatalf("a converged ring fails the check: %v", CheckRing(c.nodes))
	}
	n := c.nodes[2]
	n.mu.Lock()
	n.succs[0] = n.self // pretend it lost its successor
	n.mu.Unlock()
	if CheckRing(c.nodes) == nil {
		t.Fatal("CheckRing accepted a node that skips its successor")
	}
	if Converged(c.nodes) {
		t.Fatal("Converged accepted a node that skips its successor")
	}
	first, all := FirstViolation(c.nodes), CheckRing(c.nodes)
	if first == nil || !strings.HasPrefix(all.Error(), first.Error()+"\n") && all.Error() != first.Error() {
		t.Fatalf("first violation %v, CheckRing %v", first, all)
	}
}
