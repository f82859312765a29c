package cuda

import (
	"fmt"
	"unsafe"

	"github.com/latent-ai/latent/backend"
)

// Pipelined greedy decoding. ArgmaxAsync ends a pass with the argmax kernel
// writing its answer over the pass's token id in device memory (embed has
// read it by then), queues the pass, a 4-byte copy of the answer into pinned
// memory and an event, and returns. BeginNext then starts a pass whose token
// is that answer: only its position goes up, in stream order, so the host
// records and queues step N+1 while the GPU still runs step N, and reads
// step N's token afterwards.

// slot is one queued pass's pinned words: its token and position going up,
// its answer coming back, and the event recorded after the answer's copy.
type slot struct {
	b    *Backend
	host *[4]int32 // token, position, answer
	ev   uintptr
	busy bool
}

// Wait blocks until the answer has arrived and returns it.
func (s *slot) Wait() int32 {
	b := s.b
	if !s.busy {
		panic("cuda: an ArgmaxAsync answer waited for twice")
	}
	var err error
	b.run(func() { err = b.d.check("cuEventSynchronize", call(b.d.cuEventSynchronize, s.ev)) })
	if err != nil {
		panic(fmt.Errorf("cuda: argmax: %w", err))
	}
	v := s.host[2]
	s.busy = false
	b.unanswered--
	b.freeSlots = append(b.freeSlots, s)
	return v
}

// takeSlot returns a free slot, allocating backend.MaxPending of them in
// one pinned page the first time.
func (b *Backend) takeSlot() *slot {
	if b.slotPage == 0 {
		var err error
		b.run(func() {
			if err = b.d.check("cuMemAllocHost", call(b.d.cuMemAllocHost, uintptr(unsafe.Pointer(&b.slotPage)), 16*backend.MaxPending)); err != nil {
				return
			}
			for i := range backend.MaxPending {
				s := &slot{b: b, host: (*[4]int32)(hostPtr(b.slotPage + uintptr(16*i)))}
				if err = b.d.check("cuEventCreate", call(b.d.cuEventCreate, uintptr(unsafe.Pointer(&s.ev)), 2)); err != nil { // CU_EVENT_DISABLE_TIMING
					return
				}
				b.slots = append(b.slots, s)
			}
			b.freeSlots = append(b.freeSlots[:0], b.slots...)
		})
		if err != nil {
			panic(fmt.Errorf("cuda: %w", err))
		}
	}
	n := len(b.freeSlots)
	if n == 0 {
		panic(fmt.Sprintf("cuda: more than %d ArgmaxAsync answers not waited for", backend.MaxPending))
	}
	s := b.freeSlots[n-1]
	b.freeSlots = b.freeSlots[:n-1]
	s.busy = true
	return s
}

// ArgmaxAsync is Argmax of t's one row, queued (backend.Backend.ArgmaxAsync).
func (b *Backend) ArgmaxAsync(t backend.Tensor) backend.Pending {
	p := tens(t)
	if p.rows != 1 || p.cols == 0 {
		panic(fmt.Sprintf("cuda: argmax async of %d×%d (want one row)", p.rows, p.cols))
	}
	b.reads(p)
	b.record("argmax", grid1(1), [3]uint32{1024, 1, 1}, int64(p.cols)*4,
		uint64(b.tokensDev()), uint64(p.ptr), uint64(p.stride), uint64(p.cols))
	s := b.takeSlot()
	var err error
	b.run(func() {
		d := b.d
		if err = b.submit(s); err != nil {
			return
		}
		if err = d.check("cuMemcpyDtoHAsync", call(d.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&s.host[2])), b.tokDev, 4, b.stream)); err != nil {
			return
		}
		err = d.check("cuEventRecord", call(d.cuEventRecord, s.ev, b.stream))
	})
	if err != nil {
		panic(fmt.Errorf("cuda: argmax: %w", err))
	}
	b.unanswered++
	b.chained = true
	return s
}

// BeginNext starts a one-token pass at pos over the last ArgmaxAsync's
// answer, still in device memory (backend.Backend.BeginNext).
func (b *Backend) BeginNext(pos int32) {
	if !b.chained {
		panic("cuda: begin next: the last pass did not end in ArgmaxAsync")
	}
	b.one = [2]int32{-1, pos} // the token is on the device; -1 is never uploaded
	b.Begin(b.one[:1], b.one[1:])
	b.fromDevice = true
}

// freeSlotPage releases the pinned page and the events (context thread).
func (b *Backend) freeSlotPage() {
	for _, s := range b.slots {
		call(b.d.cuEventDestroy, s.ev)
	}
	if b.slotPage != 0 {
		call(b.d.cuMemFreeHost, b.slotPage)
	}
}
