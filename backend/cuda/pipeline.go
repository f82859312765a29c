package cuda

import (
	"fmt"
	"unsafe"

	"github.com/latent-ai/latent/backend"
)

// Pipelined decoding. ArgmaxAsync (DrawAsync) ends a pass with the argmax
// (draw) kernel writing its answer over the pass's token id in device
// memory (embed has read it by then), queues the pass, a 4-byte copy of the answer into pinned
// memory and an event, and returns. BeginNext then starts a pass whose token
// is that answer: only its position goes up, in stream order, so the host
// records and queues step N+1 while the GPU still runs step N, and reads
// step N's token afterwards.

// slot is one queued pass's pinned words: its token and position going up,
// its answer coming back, a draw's numbers going up, and the event
// recorded after the answer's copy.
type slot struct {
	b    *Backend
	host *[4]int32 // token, position, answer
	draw *drawArgs // a draw's numbers going up
	ev   uintptr
	busy bool
}

// Wait blocks until the answer has arrived and returns it.
func (s *slot) Wait() int32 {
	b := s.b
	if !s.busy {
		panic("cuda: an answer waited for twice")
	}
	var err error
	b.run(func() { err = b.d.check("cuEventSynchronize", call(b.d.cuEventSynchronize, s.ev)) })
	if err != nil {
		panic(fmt.Errorf("cuda: answer: %w", err))
	}
	v := s.host[2]
	s.busy = false
	b.unanswered--
	b.freeSlots = append(b.freeSlots, s)
	return v
}

// slotBytes is one slot's pinned words: four int32 and a drawArgs (8-byte
// aligned in every slot).
const slotBytes = 16 + unsafe.Sizeof(drawArgs{})

// takeSlot returns a free slot, allocating backend.MaxPending of them in
// one pinned page the first time.
func (b *Backend) takeSlot() *slot {
	if b.slotPage == 0 {
		var err error
		b.run(func() {
			if err = b.d.check("cuMemAllocHost", call(b.d.cuMemAllocHost, uintptr(unsafe.Pointer(&b.slotPage)), slotBytes*backend.MaxPending)); err != nil {
				return
			}
			for i := range backend.MaxPending {
				at := b.slotPage + slotBytes*uintptr(i)
				s := &slot{b: b, host: (*[4]int32)(hostPtr(at)), draw: (*drawArgs)(hostPtr(at + 16))}
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
		panic(fmt.Sprintf("cuda: more than %d answers not waited for", backend.MaxPending))
	}
	s := b.freeSlots[n-1]
	b.freeSlots = b.freeSlots[:n-1]
	s.busy = true
	return s
}

// ArgmaxAsync is Argmax of t's one row, queued (backend.Backend.ArgmaxAsync).
func (b *Backend) ArgmaxAsync(t backend.Tensor) backend.Pending {
	p := b.oneRow(t, "argmax async")
	b.record("argmax", grid1(1), [3]uint32{1024, 1, 1}, int64(p.cols)*4,
		uint64(b.tokensDev()), uint64(p.ptr), uint64(p.stride), uint64(p.cols))
	return b.queueAnswer(nil)
}

// DrawAsync is ArgmaxAsync with a sampled pick (backend.Drawer; the
// kernels are pick_top and pick_draw in kernels/basic.cu). pick_top keeps
// the best TopK of each 1024 logits, then of each 1024 of those keys, until
// pick_draw can sort what is left in shared memory. The draw's numbers go
// up through the slot's pinned words, in stream order, so that one recorded
// step replays as one graph whatever they are; only TopK shapes it.
func (b *Backend) DrawAsync(t backend.Tensor, d backend.Draw) backend.Pending {
	p := b.oneRow(t, "draw async")
	K := d.TopK
	if K < 1 || K > backend.MaxDrawTopK {
		panic(fmt.Sprintf("cuda: draw async: top-k %d outside 1..%d", K, backend.MaxDrawTopK))
	}
	var in uintptr // the keys of the level before (none: the logits)
	n := p.cols
	for {
		nb := ceilDiv(n, drawSlice)
		part := b.scratch(int64(8 * nb * K))
		x, bytes := p.ptr, int64(4*n)
		if in != 0 {
			x, bytes = 0, int64(8*n) // keys, not logits
		}
		b.record("pick_top", grid1(nb), [3]uint32{drawSlice / 2, 1, 1}, bytes,
			uint64(part), uint64(x), uint64(in), uint64(n), uint64(K))
		in, n = part, nb*K
		if n <= drawMerge {
			break
		}
	}
	b.record("pick_draw", grid1(1), [3]uint32{1024, 1, 1}, int64(8*n),
		uint64(b.tokensDev()), uint64(in), uint64(n/K), uint64(K), uint64(b.drawDev()))
	return b.queueAnswer(&drawArgs{u: d.U, invT: d.InvTemp, topP: d.TopP, lnMinP: d.LnMinP})
}

// drawArgs mirrors the kernels' DrawArgs: a draw's numbers.
type drawArgs struct {
	u, invT      float64
	topP, lnMinP float32
}

const (
	drawSlice = 1024 // keys one pick_top block sorts (DRAW_SLICE)
	drawMerge = 4096 // keys pick_draw sorts (DRAW_MERGE)
)

// oneRow checks that t is one non-empty row and marks it read.
func (b *Backend) oneRow(t backend.Tensor, op string) *tensor {
	p := tens(t)
	if p.rows != 1 || p.cols == 0 {
		panic(fmt.Sprintf("cuda: %s of %d×%d (want one row)", op, p.rows, p.cols))
	}
	b.reads(p)
	return p
}

// queueAnswer queues the recorded pass, whose last kernel wrote its answer
// over the token id, then the answer's 4-byte copy into a slot and an
// event; a draw's numbers, if any, are uploaded first for pick_draw.
func (b *Backend) queueAnswer(a *drawArgs) backend.Pending {
	s := b.takeSlot()
	b.resolve()
	var err error
	b.run(func() {
		d := b.d
		if a != nil {
			*s.draw = *a
			if err = d.check("upload draw", call(d.cuMemcpyHtoDAsync, b.drawDev(), uintptr(unsafe.Pointer(s.draw)), unsafe.Sizeof(*a), b.stream)); err != nil {
				return
			}
		}
		if err = b.submit(s); err != nil {
			return
		}
		if err = d.check("cuMemcpyDtoHAsync", call(d.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&s.host[2])), b.tokDev, 4, b.stream)); err != nil {
			return
		}
		err = d.check("cuEventRecord", call(d.cuEventRecord, s.ev, b.stream))
	})
	if err != nil {
		panic(fmt.Errorf("cuda: answer: %w", err))
	}
	b.unanswered++
	b.chained = true
	return s
}

// BeginNext starts a one-token pass at pos over the last ArgmaxAsync's or
// DrawAsync's answer, still in device memory (backend.Backend.BeginNext).
func (b *Backend) BeginNext(pos int32) {
	if !b.chained {
		panic("cuda: begin next: the last pass did not end in ArgmaxAsync or DrawAsync")
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
