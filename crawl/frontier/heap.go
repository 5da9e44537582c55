package frontier

// hostHeap is a container/heap of hosts under one of two orders (waiting:
// by next-allowed time; ready: by head priority).
type hostHeap struct {
	items []*hostQueue
	less  func(a, b *hostQueue) bool
}

func (h *hostHeap) Len() int           { return len(h.items) }
func (h *hostHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *hostHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}
func (h *hostHeap) Push(x any) {
	q := x.(*hostQueue)
	q.index = len(h.items)
	h.items = append(h.items, q)
}
func (h *hostHeap) Pop() any {
	old := h.items
	q := old[len(old)-1]
	old[len(old)-1] = nil
	h.items = old[:len(old)-1]
	q.index = -1
	return q
}
