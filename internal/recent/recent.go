// Package recent keeps the values put lately under their keys, in bounded
// memory: two generations of up to a limit each. When the current one is
// full it becomes the previous one and the oldest is forgotten, so keys
// put again and again stay, and a key not put for two generations goes.
package recent

// Map is a bounded map of the values put lately. The zero Map is not
// usable: make one with New. It is not safe for concurrent use.
type Map[K comparable, V any] struct {
	limit     int
	cur, prev map[K]V
}

// New returns a Map of two generations of up to limit entries each.
func New[K comparable, V any](limit int) Map[K, V] {
	return Map[K, V]{limit: max(limit, 1), cur: make(map[K]V)}
}

// Get returns the value put last under k, if it is remembered.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	return v, ok
}

// Current returns the value put under k in the current generation, if
// any: what Put would replace.
func (m *Map[K, V]) Current(k K) (V, bool) {
	v, ok := m.cur[k]
	return v, ok
}

// Put makes v the value of k, in the current generation.
func (m *Map[K, V]) Put(k K, v V) {
	if len(m.cur) >= m.limit {
		m.prev, m.cur = m.cur, make(map[K]V, m.limit)
	}
	m.cur[k] = v
}

// Len returns the number of entries in both generations (a key in both
// counts twice).
func (m *Map[K, V]) Len() int { return len(m.cur) + len(m.prev) }
