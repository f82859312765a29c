// Package bench measures a model's prefill and decode speed the way `latent
// bench` reports it: per cache depth, medians over repetitions.
package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/engine"
)

// Options say what to measure.
type Options struct {
	Prefill int   // prompt tokens timed in one batch (-p)
	Decode  int   // tokens decoded one at a time (-n)
	Depths  []int // tokens in the cache when the prompt's and the decode's timing start
	Reps    int   // repetitions; the report is their median
	// BytesPerToken is the weight bytes one decode step reads
	// (deepseek2.FootprintOf), for the effective bandwidth.
	BytesPerToken int64
}

// Result is one depth's figures, medians over the repetitions.
type Result struct {
	Backend         string  `json:"backend"`
	Model           string  `json:"model"`
	Depth           int     `json:"depth"`
	Prefill         int     `json:"prefill_tokens"`
	Decode          int     `json:"decode_tokens"`
	Threads         int     `json:"threads,omitempty"`
	PrefillTokS     float64 `json:"prefill_tok_s"`
	DecodeTokS      float64 `json:"decode_tok_s"`
	MsPerToken      float64 `json:"ms_per_token"`      // decode
	KernelsPerToken float64 `json:"kernels_per_token"` // backend operations per decode step; 0 when the backend does not count
	BytesPerToken   int64   `json:"bytes_per_token"`   // weight bytes read per decode step
	GBs             float64 `json:"gb_s"`              // BytesPerToken at the decode rate, in 10⁹ bytes/s
}

// Need is the context a run of o needs: the deepest cache plus the timed tokens.
func (o Options) Need() int {
	return slices.Max(append([]int{0}, o.Depths...)) + o.Prefill + o.Decode
}

func (o Options) check(ctx int) error {
	switch {
	case o.Prefill < 1:
		return fmt.Errorf("bench: prefill of %d tokens: need at least 1", o.Prefill)
	case o.Decode < 1:
		return fmt.Errorf("bench: %d decode tokens: need at least 1", o.Decode)
	case o.Reps < 1:
		return fmt.Errorf("bench: %d repetitions: need at least 1", o.Reps)
	case len(o.Depths) == 0:
		return fmt.Errorf("bench: no depths")
	}
	for _, d := range o.Depths {
		if d < 0 {
			return fmt.Errorf("bench: depth %d is negative", d)
		}
	}
	if n := o.Need(); n > ctx {
		return fmt.Errorf("bench: depth %d + %d prefill + %d decode tokens exceed the context of %d", n-o.Prefill-o.Decode, o.Prefill, o.Decode, ctx)
	}
	return nil
}

// tokens returns n token ids spread over the vocabulary, deterministic.
func tokens(n, vocab, seed int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((uint64(i+seed)*2654435761 + 17) % uint64(vocab))
	}
	return t
}

// Run measures m on be (whose Name and operation count, if it is a
// backend.Counter, go into the results) at every depth of o.
func Run(m engine.Model, be backend.Backend, modelName string, o Options) ([]Result, error) {
	if err := o.check(m.Context()); err != nil {
		return nil, err
	}
	if w, ok := be.(backend.Compiler); ok { // kernels compiling in the background are not the decode's time
		w.WaitCompiles()
	}
	V := m.Vocab()
	prompt := tokens(o.Prefill, V, 1)
	var out []Result
	for _, depth := range o.Depths {
		var pre, dec, kern []float64
		for r := 0; r < o.Reps; r++ {
			// each prompt follows exactly depth tokens: filled for the
			// first repetition, cut back to them for the others
			ready := rewind
			if r == 0 {
				ready = fill
			}
			if err := ready(m, depth); err != nil {
				return nil, err
			}
			start := time.Now()
			logits, err := m.Forward(prompt, false)
			if err != nil {
				return nil, fmt.Errorf("bench: prefill: %w", err)
			}
			pre = append(pre, float64(o.Prefill)/time.Since(start).Seconds())
			next := []int32{backend.Argmax(logits)}
			// The prompt was its own test: decode, like llama-bench's tg
			// test, starts from a cache of exactly depth tokens (at depth 0
			// an empty one), not from behind the prompt. One untimed step
			// first, as llama-bench's warm-up run: what a step costs once (a
			// CUDA backend capturing its graph) is not the decode's speed.
			if err := rewind(m, depth); err != nil {
				return nil, err
			}
			if err := decode(m, next, 1); err != nil {
				return nil, err
			}
			if err := rewind(m, depth); err != nil {
				return nil, err
			}

			// Greedy decode, as generation does it: a model that picks the
			// argmax where the logits are copies back only the token, and a
			// pipelined one queues each step before the host has read the
			// token it decodes.
			launches := count(be)
			start = time.Now()
			if err := decode(m, next, o.Decode); err != nil {
				return nil, err
			}
			dec = append(dec, float64(o.Decode)/time.Since(start).Seconds())
			kern = append(kern, float64(count(be)-launches)/float64(o.Decode))
		}
		res := Result{Backend: be.Name(), Model: modelName, Depth: depth, Prefill: o.Prefill, Decode: o.Decode,
			PrefillTokS: median(pre), DecodeTokS: median(dec), KernelsPerToken: median(kern), BytesPerToken: o.BytesPerToken}
		if t, ok := be.(interface{ Threads() int }); ok {
			res.Threads = t.Threads()
		}
		res.MsPerToken = 1000 / res.DecodeTokS
		res.GBs = float64(o.BytesPerToken) * res.DecodeTokS / 1e9
		out = append(out, res)
	}
	return out, nil
}

// fill empties m's cache and fills it with depth tokens, in batches of
// at most 512.
func fill(m engine.Model, depth int) error {
	m.Reset()
	for done := 0; done < depth; {
		n := min(512, depth-done)
		if _, err := m.Forward(tokens(n, m.Vocab(), 1000+done), false); err != nil {
			return fmt.Errorf("bench: filling the cache to %d: %w", depth, err)
		}
		done += n
	}
	return nil
}

// rewind cuts m's cache back to its first depth tokens (filling it again
// where m cannot cut).
func rewind(m engine.Model, depth int) error {
	if t, ok := m.(engine.Truncater); ok {
		t.Truncate(depth)
		return nil
	}
	return fill(m, depth)
}

// decode runs n greedy decode steps from first.
func decode(m engine.Model, first []int32, n int) error {
	if p, ok := m.(engine.Pipelined); ok {
		q, err := p.StartArgmax(first)
		for i := 1; i < n && err == nil; i++ {
			var ahead backend.Pending
			if ahead, err = p.StartArgmax(nil); err == nil {
				q.Wait()
				q = ahead
			}
		}
		if err != nil {
			return fmt.Errorf("bench: decode: %w", err)
		}
		q.Wait()
		return nil
	}
	g, fast := m.(engine.Greedy)
	next := append([]int32(nil), first...)
	for i := 0; i < n; i++ {
		var err error
		var logits []float32
		if fast {
			next[0], err = g.ForwardArgmax(next)
		} else if logits, err = m.Forward(next, false); err == nil {
			next[0] = backend.Argmax(logits)
		}
		if err != nil {
			return fmt.Errorf("bench: decode step %d: %w", i, err)
		}
	}
	return nil
}

func count(be backend.Backend) uint64 {
	if c, ok := be.(backend.Counter); ok {
		return c.Launches()
	}
	return 0
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
