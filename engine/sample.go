package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/latent-ai/latent/backend"
)

// SamplerOptions choose how the next token is picked from the logits. The
// stages run in llama.cpp's order: repetition penalty, top-k, top-p, min-p,
// temperature, then a seeded draw.
//
// The zero value is greedy decoding with every stage off; DefaultSamplerOptions
// gives llama.cpp's defaults.
type SamplerOptions struct {
	// Temperature divides the logits before the draw; ≤ 0 means greedy
	// (the argmax after the penalty). Default 0.8.
	Temperature float32
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP; 0 or 1 turns it off (llama.cpp's 0 keeps only the top
	// token: see AsUserGave). Default 0.95.
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 turns it off. Default 0.05.
	MinP float32
	// RepeatPenalty divides the positive logits and multiplies the negative
	// ones of tokens among the last RepeatLastN of the history (prompt
	// included); 0 or 1 turns it off. Default 1 (off).
	RepeatPenalty float32
	// PresencePenalty is subtracted from the logit of every token among the
	// last RepeatLastN, and FrequencyPenalty times its count there (OpenAI's
	// and llama.cpp's presence and frequency penalties, after the repeat
	// penalty); 0 turns each off. Default 0.
	PresencePenalty, FrequencyPenalty float32
	// TopK keeps the TopK most likely tokens; 0 turns it off. Default 40.
	TopK int
	// RepeatLastN is how much history the penalty looks at; 0 turns it off,
	// -1 means all of it. Default 64.
	RepeatLastN int
	// Seed seeds the draw: the same seed, options and logits give the same
	// tokens.
	Seed uint64
}

// AsUserGave is o, options a user set (flags, a request's fields, on top of
// DefaultSamplerOptions), as the sampler runs them: a top-p of 0 keeps only
// the most likely token, as llama.cpp reads it, whatever top-k says. TopP 0
// turns top-p off in SamplerOptions (the zero value samples from every
// token), so the copy has TopK 1, which keeps that same token; o itself keeps
// what the user set.
func (o SamplerOptions) AsUserGave() SamplerOptions {
	if o.TopP == 0 {
		o.TopK = 1
	}
	return o
}

// DefaultSamplerOptions are llama.cpp's defaults (seed 0).
func DefaultSamplerOptions() SamplerOptions {
	return SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}

// Validate reports the first option out of range, named as the CLI flag.
func (o SamplerOptions) Validate() error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	switch {
	case !finite(o.Temperature):
		return fmt.Errorf("temperature %v is not a finite number", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k %d is negative (0 turns it off)", o.TopK)
	case !finite(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("top-p %v is outside [0, 1]", o.TopP)
	case !finite(o.MinP) || o.MinP < 0 || o.MinP > 1:
		return fmt.Errorf("min-p %v is outside [0, 1]", o.MinP)
	case !finite(o.RepeatPenalty) || o.RepeatPenalty < 0:
		return fmt.Errorf("repeat-penalty %v is not a non-negative number", o.RepeatPenalty)
	case !finite(o.PresencePenalty):
		return fmt.Errorf("presence-penalty %v is not a finite number", o.PresencePenalty)
	case !finite(o.FrequencyPenalty):
		return fmt.Errorf("frequency-penalty %v is not a finite number", o.FrequencyPenalty)
	case o.RepeatLastN < -1:
		return fmt.Errorf("repeat-last-n %d is below -1 (-1: the whole history)", o.RepeatLastN)
	}
	return nil
}

// PlainGreedy reports whether a sampler with these options always picks the
// largest logit (temperature ≤ 0 and no repetition penalty), so that only
// the argmax is needed. Its rules differ from the sampler's only for logits
// whose first value is NaN (backend.Argmax then gives 0): a broken model either way.
func (o SamplerOptions) PlainGreedy() bool {
	return o.Temperature <= 0 && !o.penalizes()
}

// penalizes reports whether the repetition penalties change any logit.
func (o SamplerOptions) penalizes() bool {
	return o.RepeatLastN != 0 && (o.repeats() || o.PresencePenalty != 0 || o.FrequencyPenalty != 0)
}

// repeats reports whether the repeat penalty is on.
func (o SamplerOptions) repeats() bool { return o.RepeatPenalty != 0 && o.RepeatPenalty != 1 }

// Draw is the backend.Draw that picks what Sample would (given the same
// uniform number), if these options have one: a positive temperature,
// top-k between 1 and backend.MaxDrawTopK, and no repetition penalty.
func (o SamplerOptions) Draw() (backend.Draw, bool) {
	if o.Temperature <= 0 || !o.drawableTopK() || o.penalizes() {
		return backend.Draw{}, false
	}
	d := backend.Draw{TopK: o.TopK, TopP: o.TopP, LnMinP: float32(math.Inf(-1)), InvTemp: 1 / float64(o.Temperature)}
	if o.MinP > 0 {
		d.LnMinP = float32(math.Log(float64(o.MinP)))
	}
	return d, true
}

// drawableTopK reports whether top-k is in the range a backend.Draw serves
// (1 to backend.MaxDrawTopK), where the sampler sorts its candidates as the
// draw does.
func (o SamplerOptions) drawableTopK() bool { return o.TopK >= 1 && o.TopK <= backend.MaxDrawTopK }

// pcgStream is the second PCG seed word: any fixed value works, it only has
// to stay the same so that a seed keeps giving the same tokens.
const pcgStream = 0x9e3779b97f4a7c15

// Sampler picks tokens from logits as its options say. Its buffers grow to
// the vocabulary on the first call and are reused, so steady-state calls do
// not allocate. It is not safe for concurrent use.
type Sampler struct {
	o     SamplerOptions
	rng   *rand.Rand
	buf   []float32     // the logits after the repetition penalty
	cand  []candidate   // the tokens still in the running
	w     []float64     // their weights for the draw
	count []int32       // each recent token's count: all zero between calls
	mass  [1024]float64 // top-p's probability mass per logit bucket
}

type candidate struct {
	id    int32
	logit float32
}

// NewSampler checks o and returns a sampler seeded from o.Seed.
func NewSampler(o SamplerOptions) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{o: o, rng: rand.New(rand.NewPCG(o.Seed, pcgStream))}, nil
}

// Sample picks the next token from logits (one per vocabulary entry, at least
// one) given the tokens so far; history ids outside the vocabulary are
// ignored. logits is not modified. Each call takes one number from the
// seeded generator, drawing or not.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	return s.SampleWith(logits, history, s.rng.Float64())
}

// SampleWith is Sample with u, in [0, 1), as the draw's uniform number
// instead of the generator's next: what a backend.Draw computes from the
// same logits and u.
func (s *Sampler) SampleWith(logits []float32, history []int32, u float64) int32 {
	l := s.penalize(logits, history)
	if s.o.Temperature <= 0 {
		return greedy(l)
	}
	cand, top := s.candidates(l)
	if len(cand) == 0 {
		return greedy(l)
	}
	return s.draw(cand, top, u)
}

// greedy is the index of the largest logit, the first on ties, never a NaN
// one unless all are (then 0).
func greedy(l []float32) int32 {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range l {
		if v > bv {
			best, bv = i, v
		}
	}
	return int32(best)
}

// penalize returns logits with the repetition penalties applied once to
// each distinct recent token, as llama.cpp's penalties sampler does: the
// repeat penalty divides a positive logit and multiplies another, then
// count·frequency + presence is subtracted. It works in a copy so that the
// caller's logits stay as they were.
func (s *Sampler) penalize(logits []float32, history []int32) []float32 {
	o := s.o
	if !o.penalizes() || len(history) == 0 {
		return logits
	}
	if n := o.RepeatLastN; n > 0 && n < len(history) {
		history = history[len(history)-n:]
	}
	V := len(logits)
	if cap(s.buf) < V {
		s.buf = make([]float32, V)
		s.count = make([]int32, V)
	}
	buf, count := s.buf[:V], s.count[:V]
	copy(buf, logits)
	for _, t := range history { // count each recent token
		if t >= 0 && int(t) < V {
			count[t]++
		}
	}
	for _, t := range history { // and penalise it once, clearing its count
		if t < 0 || int(t) >= V || count[t] == 0 {
			continue
		}
		if o.repeats() {
			if buf[t] <= 0 {
				buf[t] *= o.RepeatPenalty
			} else {
				buf[t] /= o.RepeatPenalty
			}
		}
		buf[t] -= float32(count[t])*o.FrequencyPenalty + o.PresencePenalty
		count[t] = 0
	}
	return buf
}

// better orders candidates from most to least likely, the lower id first on
// ties, so that the outcome never depends on sort stability.
func better(a, b candidate) int {
	if a.logit != b.logit {
		if a.logit > b.logit {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.id, b.id)
}

// candidates applies top-k, top-p and min-p to l and returns the survivors
// with the largest logit, or nothing when the largest is -Inf or +Inf. NaN
// logits never survive. The survivors come most likely first when top-p is
// on, and whenever top-k leaves at most backend.MaxDrawTopK: then a
// backend.Draw sums and walks the same candidates in the same order, and
// both pick the same token for the same number.
//
// Without that sort, min-p runs before the sort although llama.cpp applies
// it after top-p: both keep a prefix of the same sorted order, min-p's
// threshold depends only on the top logit and top-p's cut only on the set
// top-k left, so the result is the same, and sorting only min-p's survivors
// is much cheaper on a large vocabulary.
func (s *Sampler) candidates(l []float32) ([]candidate, float32) {
	V := len(l)
	if cap(s.cand) < V {
		s.cand = make([]candidate, 0, V)
		s.w = make([]float64, 0, V)
	}
	o := s.o
	cand := s.cand[:0]
	if o.TopK > 0 && o.TopK < V {
		cand = topK(cand, l, o.TopK)
	} else {
		for i, x := range l {
			if x == x { // not NaN
				cand = append(cand, candidate{int32(i), x})
			}
		}
	}
	sorted := o.drawableTopK()
	if sorted {
		slices.SortFunc(cand, better)
	}
	top := float32(math.Inf(-1))
	if sorted && len(cand) > 0 {
		top = cand[0].logit // better puts a largest first: there is no NaN to break the order
	} else {
		for _, c := range cand {
			if c.logit > top {
				top = c.logit
			}
		}
	}
	if !(top > float32(math.Inf(-1))) || top > math.MaxFloat32 {
		return nil, top // nothing finite to weigh against: the caller picks greedily
	}

	minP := float32(math.Inf(-1))
	if o.MinP > 0 {
		// llama.cpp: keep logit ≥ top + ln(min_p), i.e. p ≥ min_p · p_max.
		minP = top + float32(math.Log(float64(o.MinP)))
	}
	topP := o.TopP > 0 && o.TopP < 1
	var z float64 // top-p's normaliser: over the set top-k left
	cut := buckets{cut: -1}
	switch {
	case topP && sorted: // few, in order: the cut below walks them all
		for _, c := range cand {
			z += math.Exp(float64(c.logit - top))
		}
	case topP:
		z, cut = s.cutTopP(cand, top)
	}
	kept := cand[:0]
	for _, c := range cand {
		if c.logit >= minP && cut.reaches(c.logit) {
			kept = append(kept, c)
		}
	}
	cand = kept
	if topP {
		if !sorted {
			slices.SortFunc(cand, better)
		}
		var cum float64
		for i, c := range cand {
			cum += math.Exp(float64(c.logit-top)) / z
			if cum >= float64(o.TopP) {
				cand = cand[:i+1]
				break
			}
		}
	}
	return cand, top
}

// buckets split the logits below top into equal ranges, the top first.
type buckets struct {
	top, scale float32
	last, cut  int // the last bucket; the last one kept (-1: no cut)
}

func (b buckets) of(x float32) int {
	if f := (b.top - x) * b.scale; f >= 0 && f < float32(b.last) {
		return int(f)
	}
	return b.last // the lowest logits, and -Inf
}

// reaches reports whether x lies in a bucket above the cut.
func (b buckets) reaches(x float32) bool { return b.cut < 0 || b.of(x) <= b.cut }

// cutTopP returns the sum of exp(logit − top) over cand and the logit
// buckets that top-p's cut can reach. Sorting a whole vocabulary costs tens
// of milliseconds, so, as llama.cpp does, it spreads the mass over buckets of
// logit below top and finds the first bucket where it reaches p: only that
// bucket and the ones above it need sorting.
func (s *Sampler) cutTopP(cand []candidate, top float32) (float64, buckets) {
	w := s.w[:len(cand)]
	lo := top
	var z float64
	for i, c := range cand {
		w[i] = math.Exp(float64(c.logit - top))
		z += w[i]
		if c.logit < lo && c.logit > float32(math.Inf(-1)) {
			lo = c.logit
		}
	}
	b := buckets{top: top, last: len(s.mass) - 1, cut: -1}
	if lo == top {
		return z, b
	}
	b.scale = float32(b.last) / (top - lo)
	clear(s.mass[:])
	for i, c := range cand {
		s.mass[b.of(c.logit)] += w[i]
	}
	need, cum := float64(s.o.TopP)*z, 0.0
	for i, m := range s.mass {
		if cum += m; cum >= need {
			if i < b.last {
				b.cut = i
			}
			break
		}
	}
	return z, b
}

// draw picks one candidate with probability ∝ exp((logit − top)/T),
// walking u times their sum.
func (s *Sampler) draw(cand []candidate, top float32, u float64) int32 {
	w := s.w[:len(cand)]
	inv := 1 / float64(s.o.Temperature)
	var sum float64
	for i, c := range cand {
		w[i] = math.Exp(float64(c.logit-top) * inv)
		sum += w[i]
	}
	r := u * sum
	for i, x := range w {
		if r < x {
			return cand[i].id
		}
		r -= x
	}
	// rounding left r above every weight: the last candidate with one
	for i := len(w) - 1; i > 0; i-- {
		if w[i] > 0 {
			return cand[i].id
		}
	}
	return cand[0].id
}

// topK gathers the k best tokens of l into dst (unsorted) with a min-heap
// whose root is the worst one kept: O(V log k) instead of sorting V tokens.
func topK(dst []candidate, l []float32, k int) []candidate {
	h := dst[:0]
	for i, x := range l {
		c := candidate{int32(i), x}
		if x != x { // NaN
			continue
		}
		if len(h) < k {
			h = append(h, c)
			for j := len(h) - 1; j > 0; { // sift up
				p := (j - 1) / 2
				if better(h[j], h[p]) <= 0 {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			continue
		}
		if x < h[0].logit || better(c, h[0]) >= 0 { // the first test is the fast path
			continue
		}
		h[0] = c
		for j := 0; ; { // sift down: the worst child moves up
			m, a, b := j, 2*j+1, 2*j+2
			if a < k && better(h[a], h[m]) > 0 {
				m = a
			}
			if b < k && better(h[b], h[m]) > 0 {
				m = b
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
	return h
}
