package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// job is work over an index range [0, n) that the pool splits into chunks.
// Operations keep their job in a field of the backend and pass a pointer,
// so handing work to the pool allocates nothing.
type job interface {
	// do processes indices [lo, hi) on worker (0 ≤ worker < threads),
	// which owns that worker's scratch for the duration.
	do(lo, hi, worker int)
}

// pool runs jobs on a fixed set of goroutines. Work is handed out in chunks
// of grain indices from a shared counter, so a worker slowed by another
// process on its core takes fewer chunks instead of holding everyone up; the
// calling goroutine is worker 0.
//
// A decode step hands out a few hundred jobs microseconds apart, and waking
// a parked goroutine takes tens of microseconds. So when the pool has no
// more threads than the machine has cores, a worker spins on the job
// generation for up to spinFor before it parks, and the caller spins as
// long for the others to finish. On a quiet machine that is worth 13% of
// decode (youtu Q4_0, 2 threads on a 16-core Sapphire Rapids: 16.0 -> 18.1
// tok/s); with another busy process on one of two cores it costs as much
// (4.6 -> 4.0), which is why the spin is short and bounded.
type pool struct {
	n      int
	spin   bool            // whether waits spin before they park
	wake   []chan struct{} // one per worker but the caller's
	parked []atomic.Bool   // worker w waits on wake[w]
	gen    atomic.Uint64   // the job's generation and workers (see workersOf)
	busy   atomic.Int32    // workers other than the caller still in the job, + callerParked
	done   chan struct{}   // the last worker out wakes a parked caller
	closed atomic.Bool
	once   sync.Once

	// the running job
	j            job
	total, grain int64
	next         atomic.Int64
}

const spinFor = 20 * time.Microsecond

// gen holds a generation, bumped for each job (and at close), in its high
// 32 bits and the job's number of workers, caller included, in its low 32:
// workers 0..workersOf(gen)-1 and no more than the job has chunks, so that a
// small job neither wakes nor waits for workers with nothing to take. One
// word, so that no worker reads a job's generation with another's count.
func workersOf(gen uint64) int { return int(uint32(gen)) }

// callerParked, added to busy, says the caller waits on done. In the same
// word as the count, so that the last worker's decrement also reads whether
// to wake the caller: a flag of its own, read after the count reached 0,
// could be the next job's caller's, woken before that job was done.
const callerParked = 1 << 30

func newPool(n int) *pool {
	p := &pool{n: n, spin: n <= runtime.NumCPU(), wake: make([]chan struct{}, n), parked: make([]atomic.Bool, n), done: make(chan struct{}, 1)}
	for i := 1; i < n; i++ {
		p.wake[i] = make(chan struct{}, 1)
		go p.loop(i)
	}
	return p
}

// until reports whether ready said yes, spinning up to spinFor if p spins.
func (p *pool) until(ready func() bool) bool {
	if ready() {
		return true
	}
	if !p.spin {
		return false
	}
	start := time.Now()
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 == 0 && time.Since(start) > spinFor {
			return false
		}
	}
}

// loop is worker w: for each new generation, its share of the job if the
// job runs on it.
func (p *pool) loop(w int) {
	var seen uint64 // gen starts at 0; a job may come before this goroutine runs
	for {
		seen = p.await(w, seen)
		if p.closed.Load() {
			return
		}
		if w >= workersOf(seen) {
			// Not counted in busy: the job may be over, and its fields
			// another job's, by now.
			continue
		}
		p.work(w)
		if p.busy.Add(-1) == callerParked {
			p.done <- struct{}{}
		}
	}
}

// await returns gen once it differs from seen. A worker parks by setting
// parked[w]; whoever clears it (the worker itself on a late job, or run,
// which clears it only for the job's workers: the others stay parked through
// the job) owns the wake-up, so no send is lost or left over. A wake-up can
// be for the job the worker has just done: run, still going through the
// workers, finds it parked again after it took part. It parks once more.
func (p *pool) await(w int, seen uint64) uint64 {
	if p.until(func() bool { return p.gen.Load() != seen }) {
		return p.gen.Load()
	}
	for {
		p.parked[w].Store(true)
		if p.gen.Load() != seen && p.parked[w].CompareAndSwap(true, false) {
			return p.gen.Load()
		}
		<-p.wake[w]
		if g := p.gen.Load(); g != seen {
			return g
		}
	}
}

func (p *pool) close() {
	p.once.Do(func() {
		p.closed.Store(true)
		p.gen.Add(1 << 32)
		for _, c := range p.wake[1:] {
			close(c)
		}
	})
}

// run calls j.do over [0, n) in chunks of grain indices (at least 1) spread
// over at most one worker per chunk, and returns when all are done. Not
// reentrant.
func (p *pool) run(n, grain int, j job) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	parts := min(p.n, (n-1)/grain+1)
	if parts <= 1 {
		j.do(0, n, 0)
		return
	}
	p.j, p.total, p.grain = j, int64(n), int64(grain)
	p.next.Store(0)
	p.busy.Store(int32(parts - 1)) // and callerParked, if the last job set it, cleared
	// Only run and close write gen, never at once: a load and a store will do.
	p.gen.Store((p.gen.Load()>>32+1)<<32 | uint64(parts))
	for w := 1; w < parts; w++ {
		if p.parked[w].CompareAndSwap(true, false) {
			p.wake[w] <- struct{}{}
		}
	}
	p.work(0)
	// Parking with the count already at 0, no worker is left to send.
	if !p.until(func() bool { return p.busy.Load() == 0 }) && p.busy.Add(callerParked) != callerParked {
		<-p.done
	}
	p.j = nil
}

func (p *pool) work(w int) {
	for {
		lo := p.next.Add(p.grain) - p.grain
		if lo >= p.total {
			return
		}
		p.j.do(int(lo), int(min(lo+p.grain, p.total)), w)
	}
}

// split picks a grain that gives each of n workers about four chunks of
// [0, total), in multiples of align.
func split(total, workers, align int) int {
	g := total / (4 * workers)
	g = (g + align - 1) / align * align
	return max(g, align)
}
