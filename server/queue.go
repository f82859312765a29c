package server

import (
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned by acquire when max requests are already waiting.
var errQueueFull = errors.New("queue full")

// queue hands the model to one request at a time, in arrival order. At most
// max requests wait; a request that gives up (its context ends) leaves its
// place at once.
type queue struct {
	mu      sync.Mutex
	max     int
	running bool
	waiting []chan struct{} // closed when the model is handed to that waiter
}

func newQueue(max int) *queue { return &queue{max: max} }

// acquire waits for the model. The returned release must be called once the
// request is done with it.
func (q *queue) acquire(ctx context.Context) (release func(), err error) {
	q.mu.Lock()
	if !q.running && len(q.waiting) == 0 {
		q.running = true
		q.mu.Unlock()
		return q.releaseOnce(), nil
	}
	if len(q.waiting) >= q.max {
		q.mu.Unlock()
		return nil, errQueueFull
	}
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn)
	q.mu.Unlock()

	select {
	case <-turn:
		return q.releaseOnce(), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, c := range q.waiting {
		if c == turn {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	q.mu.Unlock()
	// The model was handed over as the context ended: pass it on.
	q.release()
	return nil, ctx.Err()
}

func (q *queue) releaseOnce() func() {
	var once sync.Once
	return func() { once.Do(q.release) }
}

// release hands the model to the longest waiter, or marks it free.
func (q *queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.running = false
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	close(next)
}

// depth is the number of requests waiting.
func (q *queue) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// busy reports whether a request holds the model.
func (q *queue) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}
