package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// epochTable is the durable record of ownership a node has seen: for every
// ring point, the highest Epoch any claim covering it has carried, whether
// the claim was this node's own or one it accepted as a replica. It only
// ever rises. A replica refuses a claim lower than the table anywhere in
// its range, which is what makes epochs fencing tokens; a node that finds
// its own claim beaten by the table knows it is stale.
type epochTable struct{ m segMap }

// raise lifts the table over r to at least e and reports whether anything
// changed.
func (t *epochTable) raise(r Range, e Epoch) bool {
	if e.IsZero() {
		return false
	}
	s := spansOf(r)
	if t.m.atLeast(s, e) {
		return false
	}
	next := t.m.raise(s, e)
	changed := !slices.Equal(next, t.m)
	t.m = next
	return changed
}

// max returns the highest epoch over r, zero if none is known.
func (t *epochTable) max(r Range) Epoch { return t.m.maxOver(spansOf(r)) }

// entries returns the table over r as claims, clipped to r.
func (t *epochTable) entries(r Range) []Claim { return t.m.within(spansOf(r)).claims() }

// higher returns the parts of r whose epoch is above e, with their epochs:
// what a replica reports back when it refuses a claim.
func (t *epochTable) higher(r Range, e Epoch) []Claim {
	s := spansOf(r)
	if !t.m.anyAbove(s, e) {
		return nil
	}
	var out segMap
	for _, p := range t.m.within(s) {
		if e.Less(p.e) {
			out = append(out, p)
		}
	}
	return out.claims()
}

// epochTableVersion is the first byte of the encoding.
const epochTableVersion = 1

// maxOwnerLen bounds an owner name when decoding, so garbage cannot make
// us allocate wildly.
const maxOwnerLen = 1024

// MarshalBinary encodes the table: a version byte, the segment count, then
// per segment lo, hi, N (uvarints) and the owner (uvarint length, bytes).
func (t *epochTable) MarshalBinary() ([]byte, error) {
	b := []byte{epochTableVersion}
	b = binary.AppendUvarint(b, uint64(len(t.m)))
	for _, g := range t.m {
		b = binary.AppendUvarint(b, g.lo)
		b = binary.AppendUvarint(b, g.hi)
		b = binary.AppendUvarint(b, g.e.N)
		b = binary.AppendUvarint(b, uint64(len(g.e.Owner)))
		b = append(b, g.e.Owner...)
	}
	return b, nil
}

var errBadTable = errors.New("shard: malformed epoch table")

// UnmarshalBinary decodes what MarshalBinary produced, rejecting anything
// else: unknown version, truncation, trailing bytes, zero epochs, and
// segments out of order or overlapping.
func (t *epochTable) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty", errBadTable)
	}
	if b[0] != epochTableVersion {
		return fmt.Errorf("%w: version %d, want %d", errBadTable, b[0], epochTableVersion)
	}
	b = b[1:]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%w: bad %s", errBadTable, what)
		}
		b = b[n:]
		return v, nil
	}
	count, err := next("count")
	if err != nil {
		return err
	}
	// Each segment takes at least 4 bytes; a larger count is a lie.
	if count > uint64(len(b))/4 {
		return fmt.Errorf("%w: %d segments in %d bytes", errBadTable, count, len(b))
	}
	m := make(segMap, 0, count)
	for i := range count {
		var g seg
		if g.lo, err = next("lo"); err != nil {
			return err
		}
		if g.hi, err = next("hi"); err != nil {
			return err
		}
		if g.e.N, err = next("epoch"); err != nil {
			return err
		}
		l, err := next("owner length")
		if err != nil {
			return err
		}
		if l > maxOwnerLen || l > uint64(len(b)) {
			return fmt.Errorf("%w: owner length %d", errBadTable, l)
		}
		g.e.Owner = string(b[:l])
		b = b[l:]
		switch {
		case g.lo > g.hi:
			return fmt.Errorf("%w: segment %d: lo %d > hi %d", errBadTable, i, g.lo, g.hi)
		case g.e.N == 0:
			return fmt.Errorf("%w: segment %d: zero epoch", errBadTable, i)
		case i > 0 && m[i-1].hi >= g.lo:
			return fmt.Errorf("%w: segment %d overlaps or precedes the one before", errBadTable, i)
		}
		m = append(m, g)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errBadTable, len(b))
	}
	t.m = m.coalesce()
	return nil
}
