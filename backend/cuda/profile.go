package cuda

import (
	"fmt"
	"unsafe"
)

// KernelTime is one kernel launch of a profiled pass.
type KernelTime struct {
	Name    string
	Seconds float64
	Bytes   int64 // device memory read and written, as the launch counts it
}

// profiler brackets every launch with events while a pass runs eagerly.
type profiler struct {
	pool []uintptr
	used int
	recs []profRec
}

type profRec struct {
	name       string
	bytes      int64
	start, end uintptr
}

func (p *profiler) event(b *Backend) uintptr {
	if p.used == len(p.pool) {
		var ev uintptr
		if err := b.d.check("cuEventCreate", call(b.d.cuEventCreate, uintptr(unsafe.Pointer(&ev)), 0)); err != nil {
			panic(fmt.Errorf("cuda: %w", err))
		}
		p.pool = append(p.pool, ev)
	}
	ev := p.pool[p.used]
	p.used++
	call(b.d.cuEventRecord, ev, b.stream)
	return ev
}

func (p *profiler) before(b *Backend) uintptr { return p.event(b) }

func (p *profiler) after(b *Backend, ev0 uintptr, l *launch) {
	p.recs = append(p.recs, profRec{name: l.name, bytes: l.bytes, start: ev0, end: p.event(b)})
}

// Profile runs pass (one forward pass: Begin, operations, Read) with every
// kernel launched on its own and timed by events, and returns the launches
// in order with their times.
func (b *Backend) Profile(pass func()) (out []KernelTime, err error) {
	p := &profiler{}
	if len(b.launches) > 0 {
		b.flushPass()
	}
	b.prof = p
	defer func() { b.prof = nil }()
	pass()
	if len(b.launches) > 0 {
		b.flushPass()
	}
	b.run(func() {
		for _, r := range p.recs {
			var ms float32
			if e := b.d.check("cuEventElapsedTime", call(b.d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), r.start, r.end)); e != nil {
				err = e
				return
			}
			out = append(out, KernelTime{Name: r.name, Seconds: float64(ms) / 1e3, Bytes: r.bytes})
		}
		for _, ev := range p.pool {
			call(b.d.cuEventDestroy, ev)
		}
	})
	return out, err
}
