package recent

import "testing"

// A key stays for two generations after it was put last, and no longer;
// Current sees the current generation only.
func TestMapForgetsAfterTwoGenerations(t *testing.T) {
	m := New[int, string](2)
	m.Put(1, "a")
	m.Put(2, "b")
	m.Put(3, "c") // 1 and 2 become the previous generation
	if v, ok := m.Get(1); !ok || v != "a" {
		t.Fatalf("Get(1) = %q, %v one generation later", v, ok)
	}
	if _, ok := m.Current(1); ok {
		t.Fatal("Current(1) found a key of the previous generation")
	}
	m.Put(4, "d")
	m.Put(5, "e") // 3 and 4 become the previous generation; 1 and 2 go
	if _, ok := m.Get(1); ok {
		t.Fatal("Get(1) found a key two generations old")
	}
	if v, ok := m.Get(3); !ok || v != "c" {
		t.Fatalf("Get(3) = %q, %v", v, ok)
	}
	if n := m.Len(); n > 4 {
		t.Fatalf("Len = %d, bound 4", n)
	}
	m.Put(3, "C")
	if v, _ := m.Get(3); v != "C" {
		t.Fatalf("Get(3) = %q after a new Put, want C", v)
	}
}
