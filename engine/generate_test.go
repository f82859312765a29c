package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeModel is a Model whose logits come from a table: after its i-th
// Forward they peak at script[i] (token 0 once the script runs out), so
// greedy decoding replays the script; fixed, when set, is returned instead.
type fakeModel struct {
	vocab, ctx, pos int
	script          []int32
	fixed           []float32
	calls           [][]int32      // the tokens of every Forward
	resets          int            // Reset calls
	failAt          int            // the Forward call (1-based) that fails; 0: none
	hook            func(call int) // runs inside every Forward
	forwardErr      error          // what the failing call returns
}

func (f *fakeModel) Vocab() int    { return f.vocab }
func (f *fakeModel) Context() int  { return f.ctx }
func (f *fakeModel) Position() int { return f.pos }
func (f *fakeModel) Reset()        { f.pos = 0; f.resets++ }

func (f *fakeModel) Forward(tokens []int32, all bool) ([]float32, error) {
	call := len(f.calls)
	f.calls = append(f.calls, slices.Clone(tokens))
	if f.hook != nil {
		f.hook(call + 1)
	}
	if f.failAt == call+1 {
		return nil, f.forwardErr
	}
	if f.pos+len(tokens) > f.ctx {
		return nil, errors.New("fake: context full") // Generate must never get here
	}
	f.pos += len(tokens)
	if f.fixed != nil {
		return slices.Clone(f.fixed), nil
	}
	l := make([]float32, f.vocab)
	for i := range l {
		l[i] = -1
	}
	peak := int32(0)
	if call < len(f.script) {
		peak = f.script[call]
	}
	l[peak] = 5
	return l, nil
}

// emission is one emitted token and how many Forward calls preceded it.
type emission struct {
	id    int32
	calls int
}

func collect(f *fakeModel, out *[]emission) func(Token) error {
	return func(t Token) error {
		*out = append(*out, emission{t.ID, len(f.calls)})
		return nil
	}
}

func idsOf(e []emission) []int32 {
	out := []int32{}
	for _, x := range e {
		out = append(out, x.id)
	}
	return out
}

func TestGenerateStops(t *testing.T) {
	prompt := []int32{1, 2, 3}
	tests := []struct {
		name      string
		script    []int32 // what greedy decoding produces
		ctx       int
		max       int
		stop      [][]int32
		eog       []int32
		want      []int32 // emitted
		reason    string
		generated int
	}{
		{"length", []int32{5, 6, 7, 8, 9}, 64, 3, nil, nil, []int32{5, 6, 7}, StopLength, 3},
		{"length 1", []int32{5, 6}, 64, 1, nil, nil, []int32{5}, StopLength, 1},
		{"eos is not emitted", []int32{5, 6, 15, 7}, 64, 10, nil, []int32{15}, []int32{5, 6}, StopEOS, 3},
		{"any eog id", []int32{5, 14, 15}, 64, 10, nil, []int32{15, 14}, []int32{5}, StopEOS, 2},
		{"eos first", []int32{15}, 64, 10, nil, []int32{15}, []int32{}, StopEOS, 1},
		{"stop sequence is not emitted", []int32{5, 6, 7, 8}, 64, 10, [][]int32{{6, 7}}, nil, []int32{5}, StopSequence, 3},
		{"one-token stop", []int32{5, 6, 7}, 64, 10, [][]int32{{9}, {6}}, nil, []int32{5}, StopSequence, 2},
		{"partial match released", []int32{5, 6, 8, 9}, 64, 4, [][]int32{{6, 7}}, nil, []int32{5, 6, 8, 9}, StopLength, 4},
		{"held tokens flushed at the limit", []int32{5, 6, 7}, 64, 3, [][]int32{{7, 8}}, nil, []int32{5, 6, 7}, StopLength, 3},
		{"held tokens flushed at eos", []int32{5, 6, 15}, 64, 10, [][]int32{{6, 7}}, []int32{15}, []int32{5, 6}, StopEOS, 3},
		{"held tokens flushed when the context fills", []int32{5, 6, 7}, 5, 0, [][]int32{{7, 8}}, nil, []int32{5, 6, 7}, StopContext, 3},
		{"overlapping tail", []int32{5, 6, 6, 6, 7, 9}, 64, 10, [][]int32{{6, 6, 7}}, nil, []int32{5, 6}, StopSequence, 5},
		{"the earliest-starting match wins", []int32{5, 6, 7}, 64, 10, [][]int32{{7}, {6, 7}}, nil, []int32{5}, StopSequence, 3},
		{"the earliest-starting match wins, listed first", []int32{5, 6, 7}, 64, 10, [][]int32{{6, 7}, {7}}, nil, []int32{5}, StopSequence, 3},
		{"partial of one, match of another", []int32{5, 6, 7, 9}, 64, 10, [][]int32{{6, 7, 8}, {7, 9}}, nil, []int32{5, 6}, StopSequence, 4},
		{"stop at the very start", []int32{6, 7, 1}, 64, 10, [][]int32{{6, 7}}, nil, []int32{}, StopSequence, 2},
		{"the prompt does not count", []int32{7, 8}, 64, 2, [][]int32{{3, 7}}, nil, []int32{7, 8}, StopLength, 2},
		// ctx 5, prompt 3: tokens 1 and 2 are fed at positions 4 and 5, and
		// token 3 comes from the last logits.
		{"context", []int32{5, 6, 7, 8}, 5, 0, nil, nil, []int32{5, 6, 7}, StopContext, 3},
		{"context before the limit", []int32{5, 6, 7, 8}, 5, 10, nil, nil, []int32{5, 6, 7}, StopContext, 3},
		{"limit before the context", []int32{5, 6, 7, 8}, 5, 2, nil, nil, []int32{5, 6}, StopLength, 2},
		{"prompt fills the context", []int32{5, 6}, 3, 10, nil, nil, []int32{5}, StopContext, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeModel{vocab: 16, ctx: tc.ctx, pos: 7, script: tc.script}
			var got []emission
			res, err := Generate(context.Background(), f, Request{Prompt: prompt, MaxTokens: tc.max, Stop: tc.stop, EOG: tc.eog}, collect(f, &got))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(idsOf(got), tc.want) {
				t.Errorf("emitted %v, want %v", idsOf(got), tc.want)
			}
			if res.StopReason != tc.reason || res.Generated != tc.generated || res.PromptTokens != 3 {
				t.Errorf("result %+v, want reason %q, %d generated", res, tc.reason, tc.generated)
			}
			// One batched prefill from an empty cache, then one token a step,
			// each the previous pick; the last pick is never fed.
			if f.resets != 1 || len(f.calls) != tc.generated || !slices.Equal(f.calls[0], prompt) {
				t.Fatalf("%d resets, forward calls %v", f.resets, f.calls)
			}
			for i, c := range f.calls[1:] {
				if !slices.Equal(c, tc.script[i:i+1]) {
					t.Errorf("forward %d fed %v, want [%d]", i+2, c, tc.script[i])
				}
			}
			if res.PrefillDuration <= 0 {
				t.Errorf("no prefill duration")
			}
		})
	}
}

// A token that may begin a stop sequence is emitted only once the next one
// rules the sequence out; the others go out as soon as they are sampled.
func TestGenerateHoldBack(t *testing.T) {
	f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 6, 8, 9}}
	var got []emission
	_, err := Generate(context.Background(), f, Request{Prompt: []int32{1}, MaxTokens: 5, Stop: [][]int32{{6, 6, 7}}}, collect(f, &got))
	if err != nil {
		t.Fatal(err)
	}
	// 5 is sampled after call 1; the two 6s after calls 2 and 3 wait for 8
	// (sampled after call 4); 9 is the last pick, after call 5.
	want := []emission{{5, 1}, {6, 4}, {6, 4}, {8, 4}, {9, 5}}
	if !slices.Equal(got, want) {
		t.Errorf("emissions (id, forward calls before) %v, want %v", got, want)
	}
}

func TestGenerateCancel(t *testing.T) {
	t.Run("before the start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5}}
		var got []emission
		res, err := Generate(ctx, f, Request{Prompt: []int32{1}}, collect(f, &got))
		if err != nil || res.StopReason != StopCancelled || res.Generated != 0 || len(f.calls) != 0 || len(got) != 0 {
			t.Errorf("err %v, result %+v, %d forward calls, emitted %v", err, res, len(f.calls), got)
		}
	})
	t.Run("between prefill passes", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prompt := make([]int32, 2*PrefillChunk+100)
		f := &fakeModel{vocab: 16, ctx: 4096, hook: func(call int) {
			if call == 1 {
				cancel()
			}
		}}
		res, kept, err := generate(ctx, f, Request{Prompt: prompt}, 0, func(Token) error { return nil })
		if err != nil || res.StopReason != StopCancelled || res.Generated != 0 || len(f.calls) != 1 || f.pos != PrefillChunk || len(kept) != PrefillChunk {
			t.Errorf("err %v, result %+v, %d forward calls, position %d, cache holds %d", err, res, len(f.calls), f.pos, len(kept))
		}
	})
	t.Run("from emit", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7, 8, 9}}
		var got []int32
		res, err := Generate(ctx, f, Request{Prompt: []int32{1}}, func(t Token) error {
			if got = append(got, t.ID); len(got) == 2 {
				cancel()
			}
			return nil
		})
		if err != nil || res.StopReason != StopCancelled || res.Generated != 2 || !slices.Equal(got, []int32{5, 6}) || len(f.calls) != 2 {
			t.Errorf("err %v, result %+v, emitted %v, %d forward calls", err, res, got, len(f.calls))
		}
	})
	t.Run("during a forward pass, dropping held tokens", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 8, 9}}
		f.hook = func(call int) {
			if call == 3 {
				cancel()
			}
		}
		var got []emission
		res, err := Generate(ctx, f, Request{Prompt: []int32{1}, Stop: [][]int32{{6, 7}}}, collect(f, &got))
		if err != nil || res.StopReason != StopCancelled || res.Generated != 2 || !slices.Equal(idsOf(got), []int32{5}) {
			t.Errorf("err %v, result %+v, emitted %v", err, res, got)
		}
	})
	t.Run("during the prefill", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeModel{vocab: 16, ctx: 64, script: []int32{5}, hook: func(int) { cancel() }}
		var got []emission
		res, err := Generate(ctx, f, Request{Prompt: []int32{1, 2}}, collect(f, &got))
		if err != nil || res.StopReason != StopCancelled || res.Generated != 0 || len(got) != 0 || res.PrefillDuration <= 0 {
			t.Errorf("err %v, result %+v, emitted %v", err, res, got)
		}
	})
}

func TestGenerateErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		f       *fakeModel
		req     Request
		emit    func(Token) error
		want    string
		is      error
		calls   int  // Forward calls made before the error
		tooLong bool // the error wraps a *PromptError with TooLong, as CheckPrompt reports it
	}{
		{"prompt beyond the context", &fakeModel{vocab: 16, ctx: 4}, Request{Prompt: []int32{1, 2, 3, 4, 5}},
			nil, "generate: the prompt has 5 tokens, more than fit in the context of 4", nil, 0, true},
		{"empty prompt", &fakeModel{vocab: 16, ctx: 4}, Request{}, nil, "generate: the prompt is empty", nil, 0, false},
		{"token beyond the vocabulary", &fakeModel{vocab: 16, ctx: 4}, Request{Prompt: []int32{1, 16}},
			nil, "prompt token 16 is outside the vocabulary of 16", nil, 0, false},
		{"empty stop sequence", &fakeModel{vocab: 16, ctx: 4}, Request{Prompt: []int32{1}, Stop: [][]int32{{3}, {}}},
			nil, "stop sequence 2 is empty", nil, 0, false},
		{"sampler options", &fakeModel{vocab: 16, ctx: 4}, Request{Prompt: []int32{1}, Sampler: SamplerOptions{TopP: 2}},
			nil, "top-p 2 is outside [0, 1]", nil, 0, false},
		{"emit fails", &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7}}, Request{Prompt: []int32{1}},
			func(t Token) error {
				if t.ID == 6 {
					return boom
				}
				return nil
			}, "boom", boom, 2, false},
		{"emit fails on a flush", &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6}}, Request{Prompt: []int32{1}, MaxTokens: 2, Stop: [][]int32{{6, 7}}},
			func(t Token) error {
				if t.ID == 6 {
					return boom
				}
				return nil
			}, "boom", boom, 2, false},
		{"prefill fails", &fakeModel{vocab: 16, ctx: 64, failAt: 1, forwardErr: boom}, Request{Prompt: []int32{1, 2}},
			nil, "prefill of 2 tokens: boom", boom, 1, false},
		{"decode fails", &fakeModel{vocab: 16, ctx: 64, script: []int32{5, 6, 7}, failAt: 3, forwardErr: boom}, Request{Prompt: []int32{1}},
			nil, "decode step 2: boom", boom, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emit := tc.emit
			if emit == nil {
				emit = func(Token) error { return nil }
			}
			res, err := Generate(context.Background(), tc.f, tc.req, emit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			if pe := (*PromptError)(nil); tc.tooLong && (!errors.As(err, &pe) || !pe.TooLong) {
				t.Errorf("error %v (%T), want one wrapping a too-long *PromptError", err, err)
			}
			if res != nil {
				t.Errorf("result %+v with the error", res)
			}
			if len(tc.f.calls) != tc.calls {
				t.Errorf("%d forward calls, want %d", len(tc.f.calls), tc.calls)
			}
		})
	}
}

func TestCheckPrompt(t *testing.T) {
	tests := []struct {
		name    string
		prompt  []int32
		context int
		reserve int
		tooLong bool
		want    string // "": the prompt is fine
	}{
		{"fits", []int32{1, 2, 3}, 4, 0, false, ""},
		{"fills the context", []int32{1, 2, 3, 4}, 4, 0, false, ""},
		{"leaves the room reserved", []int32{1, 2, 3}, 4, 1, false, ""},
		{"empty", nil, 4, 0, false, "the prompt is empty"},
		{"empty with nothing to fit", nil, 0, 0, false, "the prompt is empty"},
		{"beyond the context", []int32{1, 2, 3, 4, 5}, 4, 0, true, "the prompt has 5 tokens, more than fit in the context of 4"},
		{"fills the context, room reserved", []int32{1, 2, 3, 4}, 4, 1, true, "the prompt has 4 tokens, more than fit in the context of 4"},
		{"too long before a bad token", []int32{1, 99, 3, 4, 5}, 4, 0, true, "5 tokens"},
		{"token beyond the vocabulary", []int32{1, 16}, 4, 0, false, "prompt token 16 is outside the vocabulary of 16"},
		{"negative token", []int32{-1, 2}, 4, 0, false, "prompt token -1 is outside the vocabulary of 16"},
		{"the last id of the vocabulary", []int32{0, 15}, 4, 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPrompt(tc.prompt, 16, tc.context, tc.reserve)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v for a good prompt", err)
				}
				return
			}
			var pe *PromptError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *PromptError", err, err)
			}
			if pe.TooLong != tc.tooLong || !strings.Contains(pe.Error(), tc.want) {
				t.Errorf("too long %v %q, want %v containing %q", pe.TooLong, pe.Error(), tc.tooLong, tc.want)
			}
		})
	}
}

func TestGenerateSampling(t *testing.T) {
	run := func(o SamplerOptions, prompt []int32, fixed []float32) []int32 {
		f := &fakeModel{vocab: len(fixed), ctx: 64, fixed: fixed}
		var got []int32
		res, err := Generate(context.Background(), f, Request{Prompt: prompt, MaxTokens: 20, Sampler: o}, func(t Token) error {
			got = append(got, t.ID)
			return nil
		})
		if err != nil || res.StopReason != StopLength {
			t.Fatalf("err %v, result %+v", err, res)
		}
		return got
	}
	flat := make([]float32, 16)
	o := SamplerOptions{Temperature: 1, Seed: 1}
	a, b := run(o, []int32{1}, flat), run(o, []int32{1}, flat)
	o.Seed = 2
	c := run(o, []int32{1}, flat)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("seed 1 twice: %v, %v; seed 2: %v", a, b, c)
	}

	// The prompt is part of the penalised history: 5's 1.0 falls to 0.5,
	// below 6's 0.9; then both are penalised and 5 (0.5) beats 6 (0.45).
	peaks := make([]float32, 16)
	peaks[5], peaks[6] = 1, 0.9
	got := run(SamplerOptions{RepeatPenalty: 2, RepeatLastN: 64}, []int32{5}, peaks)
	if want := []int32{6, 5, 5}; !slices.Equal(got[:3], want) {
		t.Errorf("with penalty: %v, want %v...", got, want)
	}
}

func TestResultRates(t *testing.T) {
	r := Result{PromptTokens: 100, Generated: 11, PrefillDuration: 500e6, DecodeDuration: 2e9}
	if r.PromptRate() != 200 || r.DecodeRate() != 5 {
		t.Errorf("rates %v, %v; want 200, 5", r.PromptRate(), r.DecodeRate())
	}
	if (&Result{Generated: 1, DecodeDuration: 1}).DecodeRate() != 0 || (&Result{}).PromptRate() != 0 {
		t.Errorf("rates without tokens or time are not 0")
	}
}

// A long prompt reaches the model in passes of PrefillChunk tokens, in
// order; the last pass's logits pick the first token.
func TestPrefillPasses(t *testing.T) {
	prompt := make([]int32, 2*PrefillChunk+100)
	for i := range prompt {
		prompt[i] = int32(i % 16)
	}
	f := &fakeModel{vocab: 16, ctx: 4096, script: []int32{0, 0, 9}}
	var got []emission
	res, err := Generate(context.Background(), f, Request{Prompt: prompt, MaxTokens: 1}, collect(f, &got))
	if err != nil || res.Generated != 1 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if len(f.calls) != 3 || !slices.Equal(slices.Concat(f.calls...), prompt) || len(f.calls[0]) != PrefillChunk || len(f.calls[2]) != 100 {
		t.Errorf("passes of %v tokens", func() (n []int) {
			for _, c := range f.calls {
				n = append(n, len(c))
			}
			return
		}())
	}
	if want := []emission{{9, 3}}; !slices.Equal(got, want) {
		t.Errorf("emitted %v, want %v", got, want)
	}
}

// evens allows even tokens but 0, noting what it accepts; it is done after
// doneAt tokens (0: never), and allows nothing when none is set.
type evens struct {
	accepted []int32
	doneAt   int
	none     bool
}

func (e *evens) Allow(id int32) bool { return !e.none && id > 0 && id%2 == 0 }
func (e *evens) Accept(id int32)     { e.accepted = append(e.accepted, id) }
func (e *evens) Done() bool          { return e.doneAt > 0 && len(e.accepted) >= e.doneAt }

func TestGenerateConstraint(t *testing.T) {
	// The script peaks at odd tokens but the third: greedy decoding under the
	// constraint takes the best allowed token instead (2: every other logit
	// is -1, the first wins), and the peak where it is allowed.
	f := &fakeModel{vocab: 10, ctx: 64, script: []int32{3, 5, 4, 7}}
	c := &evens{}
	var got []emission
	res, err := Generate(context.Background(), f, Request{Prompt: []int32{1}, MaxTokens: 4, Constraint: c}, collect(f, &got))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 2, 4, 2}; !slices.Equal(idsOf(got), want) || !slices.Equal(c.accepted, want) || res.StopReason != StopLength {
		t.Errorf("emitted %v, accepted %v, stop %s; want %v twice, length", idsOf(got), c.accepted, res.StopReason, want)
	}

	// A constraint that allows nothing ends the output; one that is done
	// ends it after the token that completed it, even the last one allowed.
	for _, c := range []struct {
		e      *evens
		max    int
		want   []int32
		calls  int
		reason string
	}{{&evens{none: true}, 4, []int32{}, 1, StopRefused}, {&evens{doneAt: 2}, 4, []int32{4, 6}, 2, StopConstraint},
		{&evens{doneAt: 2}, 2, []int32{4, 6}, 2, StopConstraint}} {
		f = &fakeModel{vocab: 10, ctx: 64, script: []int32{4, 6, 8}}
		got = nil
		res, err = Generate(context.Background(), f, Request{Prompt: []int32{1}, MaxTokens: c.max, Constraint: c.e}, collect(f, &got))
		if err != nil || !slices.Equal(idsOf(got), c.want) || res.StopReason != c.reason || len(f.calls) != c.calls {
			t.Errorf("emitted %v after %d passes, stop %s, error %v; want %v after %d, %s", idsOf(got), len(f.calls), res.StopReason, err, c.want, c.calls, c.reason)
		}
	}
}
