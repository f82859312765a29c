package cpu

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// sumJob adds every index it is given to sum, and counts its calls per worker.
type sumJob struct {
	sum   atomic.Int64
	calls []atomic.Int64
}

func (j *sumJob) do(lo, hi, w int) {
	for i := lo; i < hi; i++ {
		j.sum.Add(int64(i))
	}
	j.calls[w].Add(1)
}

// Every index of every job is done exactly once, through jobs that come
// back to back (workers spinning), after pauses longer than the spin
// (workers parked) and right after the pool starts (before its goroutines
// run); a lost wake-up would hang the test.
func TestPoolRunsEveryIndexOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := newPool(threads)
		j := &sumJob{calls: make([]atomic.Int64, threads)}
		var want int64
		for i := 0; i < 20000; i++ {
			n := 1 + i%37
			if i%1000 == 999 {
				time.Sleep(2 * spinFor)
			}
			p.run(n, 1+i%3, j)
			want += int64(n * (n - 1) / 2)
			if got := j.sum.Load(); got != want {
				t.Fatalf("%d threads, job %d: index sum %d, want %d", threads, i, got, want)
			}
		}
		p.close()
		var others int64
		for w := 1; w < threads; w++ {
			others += j.calls[w].Load()
		}
		if threads > 1 && others == 0 {
			t.Errorf("%d threads: only the caller ever took a chunk", threads)
		}
	}
}

// A job of fewer chunks than workers runs on as many workers as it has
// chunks, the caller among them; the others are left parked or spinning.
func TestPoolUsesNoMoreWorkersThanChunks(t *testing.T) {
	const threads = 8
	p := newPool(threads)
	defer p.close()
	j := &sumJob{calls: make([]atomic.Int64, threads)}
	for i := 0; i < 5000; i++ {
		chunks := 2 + i%(threads-1)
		if i%1000 == 999 {
			time.Sleep(2 * spinFor)
		}
		for w := range j.calls {
			j.calls[w].Store(0)
		}
		p.run(3*chunks, 3, j)
		for w := chunks; w < threads; w++ {
			if c := j.calls[w].Load(); c != 0 {
				t.Fatalf("job %d of %d chunks: worker %d took %d of them", i, chunks, w, c)
			}
		}
	}
}

// BenchmarkPool times one job of a few chunks of light work: what handing a
// job out and waiting for it costs, with workers spinning (threads ≤ cores)
// or parked (more threads than cores), and with more workers than chunks.
func BenchmarkPool(b *testing.B) {
	for _, c := range []struct{ threads, chunks int }{{2, 2}, {4, 2}, {4, 4}, {8, 2}} {
		b.Run(fmt.Sprintf("threads=%d/chunks=%d", c.threads, c.chunks), func(b *testing.B) {
			p := newPool(c.threads)
			defer p.close()
			j := &sumJob{calls: make([]atomic.Int64, c.threads)}
			for b.Loop() {
				p.run(64*c.chunks, 64, j)
			}
		})
	}
}
