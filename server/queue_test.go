package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQueueServesInArrivalOrder(t *testing.T) {
	q := newQueue(8)
	release, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	order := make(chan int, n)
	gaveUp, giveUp := context.WithCancel(context.Background())
	for i := range n {
		ctx := context.Background()
		if i == 2 {
			ctx = gaveUp // leaves the queue before its turn
		}
		go func() {
			rel, err := q.acquire(ctx)
			if err != nil {
				order <- -i
				return
			}
			order <- i
			time.Sleep(time.Millisecond)
			rel()
		}()
		if !waitFor(time.Second, func() bool { return q.depth() == i+1 }) {
			t.Fatalf("waiter %d did not queue", i)
		}
	}
	giveUp()
	if got := <-order; got != -2 {
		t.Fatalf("first to finish: %d, want the one that gave up", got)
	}
	if q.depth() != n-1 {
		t.Fatalf("depth %d after one left", q.depth())
	}
	release()
	release() // a second release does nothing
	var got []int
	for range n - 1 {
		got = append(got, <-order)
	}
	want := []int{0, 1, 3, 4, 5}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("served in order %v, want %v", got, want)
		}
	}
	if !waitFor(time.Second, func() bool { return !q.busy() }) || q.depth() != 0 {
		t.Error("the queue is not free at the end")
	}
}

func TestQueueBound(t *testing.T) {
	q := newQueue(2)
	release, _ := q.acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go q.acquire(ctx)
	}
	if !waitFor(time.Second, func() bool { return q.depth() == 2 }) {
		t.Fatal("waiters did not queue")
	}
	if _, err := q.acquire(context.Background()); !errors.Is(err, errQueueFull) {
		t.Fatalf("third waiter: %v, want errQueueFull", err)
	}
	cancel()
	if !waitFor(time.Second, func() bool { return q.depth() == 0 }) {
		t.Fatal("cancelled waiters stayed")
	}
	release()
	if q.busy() {
		t.Error("busy after the last release")
	}
}

func TestStopMatcher(t *testing.T) {
	tests := []struct {
		stops  []string
		pieces []string
		want   string
		hit    bool
	}{
		{nil, []string{"a", "b"}, "ab", false},
		{[]string{"END"}, []string{"abc E", "N", "D more"}, "abc ", true},
		{[]string{"END"}, []string{"abc E", "N", "x"}, "abc ENx", false},
		{[]string{"END"}, []string{"abc EN"}, "abc EN", false}, // held, then flushed
		{[]string{"xyz", "b"}, []string{"aaxy", "zb"}, "aa", true},
		{[]string{"\n\n"}, []string{"line\n", "\nnext"}, "line", true},
		{[]string{"", "é"}, []string{"caf", "é!"}, "caf", true},
	}
	for _, tc := range tests {
		m := newStopMatcher(tc.stops)
		var b strings.Builder
		hit := false
		for _, p := range tc.pieces {
			out, h := m.add(p)
			b.WriteString(out)
			if h {
				hit = true
				break
			}
		}
		if !hit {
			b.WriteString(m.flush(""))
		}
		if b.String() != tc.want || hit != tc.hit {
			t.Errorf("stops %q pieces %q: %q hit %v, want %q %v", tc.stops, tc.pieces, b.String(), hit, tc.want, tc.hit)
		}
	}
}
