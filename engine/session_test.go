package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// truncFake is a fakeModel whose cache can be cut back.
type truncFake struct {
	*fakeModel
	truncs []int
}

func (f *truncFake) Truncate(n int) {
	f.truncs = append(f.truncs, n)
	if n < f.pos {
		f.pos = n
	}
}

func TestSessionReusesThePrefix(t *testing.T) {
	// Greedy decoding replays the script, one entry per Forward call.
	f := &truncFake{fakeModel: &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7, 8, 9, 10, 11, 12}}}
	s := NewSession(f)
	turns := []struct {
		prompt []int32
		max    int
		cached int
		fed    []int32 // the prefill's tokens
		cache  []int32 // what the cache holds afterwards
	}{
		// Sampled 5, 6; 5 was fed back, 6 was not.
		{[]int32{1, 2, 3}, 2, 0, []int32{1, 2, 3}, []int32{1, 2, 3, 5}},
		// The next turn repeats the first and its answer.
		{[]int32{1, 2, 3, 5, 6, 9}, 1, 4, []int32{6, 9}, []int32{1, 2, 3, 5, 6, 9}},
		// A prompt that diverges early keeps only the common prefix.
		{[]int32{1, 2, 4}, 2, 2, []int32{4}, []int32{1, 2, 4, 8}},
		// The same prompt again: its last token is evaluated once more.
		{[]int32{1, 2, 4}, 1, 2, []int32{4}, []int32{1, 2, 4}},
		// Nothing in common.
		{[]int32{3}, 1, 0, []int32{3}, []int32{3}},
	}
	for i, tc := range turns {
		calls := len(f.calls)
		if got := s.Reusable(tc.prompt); got != tc.cached {
			t.Errorf("turn %d: Reusable %d, want %d", i+1, got, tc.cached)
		}
		res, err := s.Generate(context.Background(), Request{Prompt: tc.prompt, MaxTokens: tc.max}, func(Token) error { return nil })
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if res.Cached != tc.cached || res.PromptTokens != len(tc.prompt) {
			t.Errorf("turn %d: result %+v, want %d cached", i+1, res, tc.cached)
		}
		if !slices.Equal(f.calls[calls], tc.fed) {
			t.Errorf("turn %d: prefilled %v, want %v", i+1, f.calls[calls], tc.fed)
		}
		if !slices.Equal(s.Tokens(), tc.cache) || f.pos != len(tc.cache) {
			t.Errorf("turn %d: cache holds %v (position %d), want %v", i+1, s.Tokens(), f.pos, tc.cache)
		}
	}
	if f.resets != 3 { // NewSession, the first and the last turn
		t.Errorf("%d resets, want 3", f.resets)
	}
}

func TestSessionRates(t *testing.T) {
	r := Result{PromptTokens: 100, Cached: 60, PrefillDuration: 200e6}
	if r.PromptRate() != 200 {
		t.Errorf("prompt rate %v, want 200 (40 evaluated tokens in 0.2 s)", r.PromptRate())
	}
}

// A model without Truncate reuses the cache only when the prompt extends it.
func TestSessionWithoutTruncate(t *testing.T) {
	f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7, 8, 9}}
	s := NewSession(f)
	run := func(prompt []int32, cached int) {
		t.Helper()
		res, err := s.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 1}, func(Token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.Cached != cached {
			t.Errorf("prompt %v: %d cached, want %d", prompt, res.Cached, cached)
		}
	}
	run([]int32{1, 2}, 0)
	run([]int32{1, 2, 5, 3}, 2)
	run([]int32{1, 2, 3}, 0)
}

func TestSessionAfterFailureOrInterference(t *testing.T) {
	boom := errors.New("boom")
	f := &truncFake{fakeModel: &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7, 8}}}
	s := NewSession(f)
	emit := func(Token) error { return nil }
	if _, err := s.Generate(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 2}, emit); err != nil {
		t.Fatal(err)
	}
	f.failAt, f.forwardErr = len(f.calls)+2, boom // the first decode step
	if _, err := s.Generate(context.Background(), Request{Prompt: []int32{1, 2, 5, 6}, MaxTokens: 3}, emit); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if len(s.Tokens()) != 0 || f.pos != 0 {
		t.Errorf("after a failure the cache holds %v at position %d", s.Tokens(), f.pos)
	}
	if got := s.Reusable([]int32{1, 2, 5, 6}); got != 0 {
		t.Errorf("after a failure %d tokens are reusable", got)
	}

	// Someone else ran the model: nothing is reused.
	f.failAt = 0
	if _, err := s.Generate(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 1}, emit); err != nil {
		t.Fatal(err)
	}
	f.pos = 7
	if got := s.Reusable([]int32{1, 2, 3}); got != 0 {
		t.Errorf("with the cache moved behind the session's back, %d tokens are reusable", got)
	}

	// Cancelled before the start: the cache is left as it was.
	s.Reset()
	if _, err := s.Generate(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 1}, emit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := len(f.calls)
	res, err := s.Generate(ctx, Request{Prompt: []int32{3, 4}}, emit)
	if err != nil || res.StopReason != StopCancelled || len(f.calls) != calls || !slices.Equal(s.Tokens(), []int32{1, 2}) {
		t.Errorf("cancelled: %v, %+v, cache %v", err, res, s.Tokens())
	}
}
