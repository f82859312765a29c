package cpu

import (
	"sync"
	"sync/atomic"
)

// job is work over an index range [0, n) that the pool splits into chunks.
// Operations keep their job in a field of the backend and pass a pointer,
// so handing work to the pool allocates nothing.
type job interface {
	// do processes indices [lo, hi) on worker (0 ≤ worker < threads),
	// which owns that worker's scratch for the duration.
	do(lo, hi, worker int)
}

// pool runs jobs on a fixed set of goroutines that park between jobs. Work is
// handed out in chunks of grain indices from a shared counter, so a worker
// slowed by another process on its core takes fewer chunks instead of
// holding everyone up; the calling goroutine is worker 0.
type pool struct {
	n    int
	wake []chan struct{} // one per worker but the caller's
	wg   sync.WaitGroup
	once sync.Once

	// the running job
	j            job
	total, grain int64
	next         atomic.Int64
}

func newPool(n int) *pool {
	p := &pool{n: n, wake: make([]chan struct{}, n)}
	for i := 1; i < n; i++ {
		p.wake[i] = make(chan struct{}, 1)
		go func(w int) {
			for range p.wake[w] {
				p.work(w)
				p.wg.Done()
			}
		}(i)
	}
	return p
}

func (p *pool) close() {
	p.once.Do(func() {
		for _, c := range p.wake[1:] {
			close(c)
		}
	})
}

// run calls j.do over [0, n) in chunks of grain indices (at least 1) spread
// over the workers, and returns when all are done. Not reentrant.
func (p *pool) run(n, grain int, j job) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	parts := min(p.n, (n+grain-1)/grain)
	if parts <= 1 {
		j.do(0, n, 0)
		return
	}
	p.j, p.total, p.grain = j, int64(n), int64(grain)
	p.next.Store(0)
	p.wg.Add(parts - 1)
	for w := 1; w < parts; w++ {
		p.wake[w] <- struct{}{}
	}
	p.work(0)
	p.wg.Wait()
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
