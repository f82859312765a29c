package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// logp turns probabilities into logits whose softmax gives them back.
func logp(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, x := range p {
		l[i] = float32(math.Log(x))
	}
	return l
}

func newSampler(t testing.TB, o SamplerOptions) *Sampler {
	t.Helper()
	s, err := NewSampler(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSampleGreedy(t *testing.T) {
	tests := []struct {
		name    string
		temp    float32
		logits  []float32
		history []int32
		want    int32
	}{
		{"argmax", 0, []float32{0.1, 2.5, -1, 2.4}, nil, 1},
		{"negative temperature is greedy too", -1, []float32{0.1, 2.5, -1, 2.4}, nil, 1},
		{"first on ties", 0, []float32{1, 3, 3, 2}, nil, 1},
		{"all negative", 0, []float32{-5, -3, -4}, nil, 1},
		{"history without penalty changes nothing", 0, []float32{0, 1, 0}, []int32{1, 1, 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSampler(t, SamplerOptions{Temperature: tc.temp, RepeatPenalty: 1, RepeatLastN: 64})
			for range 3 {
				if got := s.Sample(tc.logits, tc.history); got != tc.want {
					t.Fatalf("Sample = %d, want %d", got, tc.want)
				}
			}
		})
	}
}

// Top-k 1 leaves only the argmax, so no temperature can pick anything else.
func TestSampleTopK1IsArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 300)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	logits[123] = 4 // a clear winner, then a tie below it that must not matter
	logits[7], logits[8] = 3.9, 3.9
	for _, temp := range []float32{0.1, 1, 5, 1000} {
		s := newSampler(t, SamplerOptions{Temperature: temp, TopK: 1, Seed: uint64(temp)})
		for i := range 200 {
			if got := s.Sample(logits, nil); got != 123 {
				t.Fatalf("temperature %v, draw %d: %d, want 123", temp, i, got)
			}
		}
	}
	// On an exact tie top-k 1 keeps the lower id, as greedy does.
	s := newSampler(t, SamplerOptions{Temperature: 2, TopK: 1})
	if got := s.Sample([]float32{0, 2, 1, 2}, nil); got != 1 {
		t.Errorf("tie: %d, want 1", got)
	}
}

func TestRepeatPenalty(t *testing.T) {
	tests := []struct {
		name                string
		penalty             float32
		lastN               int
		history             []int32
		want                []float32
		presence, frequency float32
	}{
		// Positive logits are divided, negative (and zero) multiplied, each
		// token once however often it occurs.
		{"divide positive, multiply negative", 2, 64, []int32{0, 1, 3, 0, 0}, []float32{1, -4, 1, 0, -1}, 0, 0},
		{"only the last n", 2, 2, []int32{0, 1, 2}, []float32{2, -4, 0.5, 0, -1}, 0, 0},
		{"-1 is the whole history", 4, -1, []int32{2, 0, 4, 4}, []float32{0.5, -2, 0.25, 0, -4}, 0, 0},
		{"zero logit stays zero", 3, 64, []int32{3}, []float32{2, -2, 1, 0, -1}, 0, 0},
		{"ids outside the vocabulary are ignored", 2, 64, []int32{-1, 99, 2}, []float32{2, -2, 0.5, 0, -1}, 0, 0},
		{"penalty 1 is off", 1, 64, []int32{0, 1}, []float32{2, -2, 1, 0, -1}, 0, 0},
		{"penalty 0 is off", 0, 64, []int32{0, 1}, []float32{2, -2, 1, 0, -1}, 0, 0},
		{"last n 0 is off", 2, 0, []int32{0, 1}, []float32{2, -2, 1, 0, -1}, 0, 0},
		{"below 1 rewards repeats", 0.5, 64, []int32{0, 1}, []float32{4, -1, 1, 0, -1}, 0, 0},
		// Presence subtracts once per distinct recent token, frequency once
		// per occurrence, after the repeat penalty (llama.cpp's order).
		{"presence", 1, 64, []int32{0, 1, 0}, []float32{1.5, -2.5, 1, 0, -1}, 0.5, 0},
		{"frequency", 1, 64, []int32{0, 1, 0, 4}, []float32{1, -2.5, 1, 0, -1.5}, 0, 0.5},
		{"all three", 2, 64, []int32{0, 0, 0, 1}, []float32{1 - 3*0.25 - 1, -4 - 0.25 - 1, 1, 0, -1}, 1, 0.25},
		{"frequency counts only the last n", 1, 2, []int32{0, 0, 0, 1}, []float32{1.5, -2.5, 1, 0, -1}, 0, 0.5},
		{"negative presence rewards repeats", 1, 64, []int32{2}, []float32{2, -2, 1.5, 0, -1}, -0.5, 0},
		{"last n 0 turns all off", 2, 0, []int32{0}, []float32{2, -2, 1, 0, -1}, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logits := []float32{2, -2, 1, 0, -1}
			orig := slices.Clone(logits)
			s := newSampler(t, SamplerOptions{RepeatPenalty: tc.penalty, RepeatLastN: tc.lastN, PresencePenalty: tc.presence, FrequencyPenalty: tc.frequency})
			for range 2 { // the second call must not see the first one's marks
				if got := s.penalize(logits, tc.history); !slices.Equal(got, tc.want) {
					t.Fatalf("penalised logits %v, want %v", got, tc.want)
				}
			}
			if !slices.Equal(logits, orig) {
				t.Errorf("caller's logits modified: %v", logits)
			}
		})
	}

	// The penalty runs before top-k: 5/10 falls below 4, so top-k 1 keeps
	// token 1 at any temperature, and greedy picks it too.
	for _, temp := range []float32{0, 1} {
		s := newSampler(t, SamplerOptions{Temperature: temp, TopK: 1, RepeatPenalty: 10, RepeatLastN: 64})
		if got := s.Sample([]float32{5, 4, 0}, []int32{0}); got != 1 {
			t.Errorf("temperature %v: penalised argmax %d, want 1", temp, got)
		}
	}
}

// ids returns the candidates' ids, sorted, for set comparisons.
func ids(c []candidate) []int32 {
	out := make([]int32, len(c))
	for i, x := range c {
		out[i] = x.id
	}
	slices.Sort(out)
	return out
}

func TestFilters(t *testing.T) {
	// Probabilities 0.05, 0.5, 0.15, 0.3 (shuffled so that order matters).
	probs := logp(0.05, 0.5, 0.15, 0.3)
	tests := []struct {
		name string
		o    SamplerOptions
		want []int32
	}{
		{"all off", SamplerOptions{}, []int32{0, 1, 2, 3}},
		{"top-k 2", SamplerOptions{TopK: 2}, []int32{1, 3}},
		{"top-k 3", SamplerOptions{TopK: 3}, []int32{1, 2, 3}},
		{"top-k beyond the vocabulary", SamplerOptions{TopK: 10}, []int32{0, 1, 2, 3}},
		// Top-p keeps the smallest most-likely set whose mass reaches p.
		{"top-p 0.4: 0.5 is enough", SamplerOptions{TopP: 0.4}, []int32{1}},
		{"top-p 0.7: 0.5+0.3", SamplerOptions{TopP: 0.7}, []int32{1, 3}},
		{"top-p 0.85: 0.5+0.3+0.15", SamplerOptions{TopP: 0.85}, []int32{1, 2, 3}},
		{"top-p 0.99: everything", SamplerOptions{TopP: 0.99}, []int32{0, 1, 2, 3}},
		{"top-p 1 is off", SamplerOptions{TopP: 1}, []int32{0, 1, 2, 3}},
		// After top-k 2 the mass is renormalised: 0.625, 0.375.
		{"top-k 2 then top-p 0.6", SamplerOptions{TopK: 2, TopP: 0.6}, []int32{1}},
		{"top-k 2 then top-p 0.65", SamplerOptions{TopK: 2, TopP: 0.65}, []int32{1, 3}},
		// Min-p drops p < min_p · 0.5.
		{"min-p 0.05: threshold 0.025", SamplerOptions{MinP: 0.05}, []int32{0, 1, 2, 3}},
		{"min-p 0.2: threshold 0.1", SamplerOptions{MinP: 0.2}, []int32{1, 2, 3}},
		{"min-p 0.5: threshold 0.25", SamplerOptions{MinP: 0.5}, []int32{1, 3}},
		{"min-p 1: only the top", SamplerOptions{MinP: 1}, []int32{1}},
		// Top-p 0.85 keeps three, min-p 0.5 then two: the shorter prefix.
		{"top-p then min-p", SamplerOptions{TopP: 0.85, MinP: 0.5}, []int32{1, 3}},
		{"min-p keeps fewer than top-p", SamplerOptions{TopP: 0.4, MinP: 0.2}, []int32{1}},
		{"top-k, top-p and min-p", SamplerOptions{TopK: 3, TopP: 0.9, MinP: 0.25}, []int32{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Temperature = 1
			s := newSampler(t, tc.o)
			cand, top := s.candidates(probs)
			if got := ids(cand); !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
			if top != probs[1] {
				t.Errorf("top logit %v, want %v", top, probs[1])
			}
		})
	}
}

// A broken model's NaN or infinite logits must not crash the sampler or be
// picked over finite ones.
func TestSampleNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	opts := []SamplerOptions{{}, DefaultSamplerOptions(), {Temperature: 1}, {Temperature: 1, TopK: 2}, {Temperature: 1, TopP: 0.5}, {Temperature: 1, MinP: 0.5}}
	tests := []struct {
		logits []float32
		want   []int32 // acceptable picks
	}{
		{[]float32{nan, 1, -inf, 2, nan}, []int32{1, 3}},
		{[]float32{-inf, -inf, 0, -inf}, []int32{2}},
		{[]float32{1, inf, 2}, []int32{1}},
		{[]float32{-inf, -inf}, []int32{0}}, // nothing to weigh: the first, as greedy
		{[]float32{nan, nan}, []int32{0}},
	}
	for _, o := range opts {
		s := newSampler(t, o)
		for _, tc := range tests {
			for range 20 {
				if got := s.Sample(tc.logits, nil); !slices.Contains(tc.want, got) {
					t.Errorf("%+v on %v: picked %d, want one of %v", o, tc.logits, got, tc.want)
					break
				}
			}
		}
	}
}

// Top-p over a whole vocabulary sorts only the buckets its cut can reach;
// the result must be what sorting everything gives.
func TestTopPBucketsMatchFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for trial := range 20 {
		l := make([]float32, 3000)
		scale := 0.5 + 3*rng.Float64()
		for i := range l {
			l[i] = float32(rng.NormFloat64() * scale)
		}
		p := float32(0.5 + 0.49*rng.Float64())
		s := newSampler(t, SamplerOptions{Temperature: 1, TopP: p})
		got, _ := s.candidates(l)

		all := make([]candidate, len(l))
		for i, x := range l {
			all[i] = candidate{int32(i), x}
		}
		slices.SortFunc(all, better)
		var z, cum float64
		for _, c := range all {
			z += math.Exp(float64(c.logit - all[0].logit))
		}
		n := len(all)
		for i, c := range all {
			if cum += math.Exp(float64(c.logit-all[0].logit)) / z; cum >= float64(p) {
				n = i + 1
				break
			}
		}
		if !slices.Equal(ids(got), ids(all[:n])) {
			t.Fatalf("trial %d (scale %.2f, p %.3f): kept %d tokens, full sort keeps %d", trial, scale, p, len(got), n)
		}
	}
}

func TestTopKHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := make([]float32, 5000)
	for i := range l {
		l[i] = float32(rng.IntN(50)) // many ties: the lower id must win them
	}
	all := make([]candidate, len(l))
	for i, x := range l {
		all[i] = candidate{int32(i), x}
	}
	slices.SortFunc(all, better)
	for _, k := range []int{1, 2, 7, 40, 999, 4999} {
		got := topK(nil, l, k)
		if !slices.Equal(ids(got), ids(all[:k])) {
			t.Errorf("top-%d differs from sorting", k)
		}
	}
}

func TestSampleSeeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	run := func(seed uint64) []int32 {
		o := DefaultSamplerOptions()
		o.Temperature, o.TopK, o.MinP, o.Seed = 1.5, 0, 0, seed
		s := newSampler(t, o)
		out := make([]int32, 50)
		for i := range out {
			out[i] = s.Sample(logits, out[:i])
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 gave two sequences:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same sequence %v", a)
	}
}

// Frequencies over many draws must match softmax(logits/T) over the tokens
// the filters keep, within 5 standard deviations of a binomial count.
func TestSampleDistribution(t *testing.T) {
	logits := []float32{1.0, 0.2, -0.5, 2.0, 0.0, -3}
	tests := []struct {
		name string
		o    SamplerOptions
		keep []int // tokens left after the filters
	}{
		{"temperature 0.7", SamplerOptions{Temperature: 0.7}, []int{0, 1, 2, 3, 4, 5}},
		{"temperature 1", SamplerOptions{Temperature: 1}, []int{0, 1, 2, 3, 4, 5}},
		{"temperature 2, top-k 3", SamplerOptions{Temperature: 2, TopK: 3}, []int{0, 1, 3}},
		// Top-p and min-p see T=1: p ≈ .209 .094 .047 .569 .077 .004;
		// top-p 0.8 keeps 3, 0 (.778), then 1 (.872); min-p 0.1 keeps
		// p ≥ .057, dropping 2 and 5.
		{"top-p 0.8, temperature 1.5", SamplerOptions{Temperature: 1.5, TopP: 0.8}, []int{0, 1, 3}},
		{"min-p 0.1, temperature 0.5", SamplerOptions{Temperature: 0.5, MinP: 0.1}, []int{0, 1, 3, 4}},
	}
	const draws = 20000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]float64, len(logits))
			var z float64
			for _, i := range tc.keep {
				want[i] = math.Exp(float64(logits[i]) / float64(tc.o.Temperature))
				z += want[i]
			}
			for i := range want {
				want[i] /= z
			}
			tc.o.Seed = 7
			s := newSampler(t, tc.o)
			count := make([]int, len(logits))
			for range draws {
				count[s.Sample(logits, nil)]++
			}
			for i, p := range want {
				got := float64(count[i]) / draws
				sigma := math.Sqrt(p * (1 - p) / draws)
				if math.Abs(got-p) > 5*sigma+1e-12 {
					t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f", i, got, p, 5*sigma)
				}
			}
		})
	}
}

func TestSampleNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	logits := make([]float32, 50000)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	history := make([]int32, 200)
	for i := range history {
		history[i] = int32(rng.IntN(len(logits)))
	}
	withPenalty := DefaultSamplerOptions()
	withPenalty.RepeatPenalty = 1.1
	for name, o := range map[string]SamplerOptions{
		"defaults":                   DefaultSamplerOptions(),
		"greedy with penalty":        {RepeatPenalty: 1.3, RepeatLastN: -1},
		"penalty, top-k, p, min-p":   withPenalty,
		"top-p over the whole vocab": {Temperature: 1, TopP: 0.9},
		"plain temperature":          {Temperature: 0.7},
	} {
		s := newSampler(t, o)
		if n := testing.AllocsPerRun(20, func() { s.Sample(logits, history) }); n != 0 {
			t.Errorf("%s: %v allocations per Sample", name, n)
		}
	}
}

func TestSamplerOptionsValidate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		o    SamplerOptions
		want string
	}{
		{SamplerOptions{Temperature: nan}, "temperature NaN is not a finite number"},
		{SamplerOptions{Temperature: float32(math.Inf(1))}, "temperature +Inf"},
		{SamplerOptions{TopK: -1}, "top-k -1 is negative"},
		{SamplerOptions{TopP: 1.5}, "top-p 1.5 is outside [0, 1]"},
		{SamplerOptions{TopP: -0.1}, "top-p -0.1 is outside"},
		{SamplerOptions{MinP: 2}, "min-p 2 is outside [0, 1]"},
		{SamplerOptions{MinP: nan}, "min-p NaN"},
		{SamplerOptions{RepeatPenalty: -1}, "repeat-penalty -1"},
		{SamplerOptions{RepeatLastN: -2}, "repeat-last-n -2 is below -1"},
	}
	for _, tc := range tests {
		_, err := NewSampler(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.o, err, tc.want)
		}
	}
	for _, o := range []SamplerOptions{{}, DefaultSamplerOptions(), {Temperature: -1, TopP: 1, MinP: 1, RepeatLastN: -1}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(10, 11))
	logits := make([]float32, 151552) // GLM-4.7-Flash's vocabulary
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	history := make([]int32, 64)
	for i := range history {
		history[i] = int32(rng.IntN(len(logits)))
	}
	for name, o := range map[string]SamplerOptions{
		"greedy":   {},
		"defaults": DefaultSamplerOptions(),
		"top-p":    {Temperature: 1, TopP: 0.95},
	} {
		b.Run(name, func(b *testing.B) {
			s := newSampler(b, o)
			for b.Loop() {
				s.Sample(logits, history)
			}
		})
	}
}

// A user's top-p of 0 keeps only the most likely token (llama.cpp's
// reading): AsUserGave's copy has top-k 1 then, and other options as given.
func TestAsUserGave(t *testing.T) {
	for _, tc := range []struct {
		in   SamplerOptions
		topK int
	}{
		{SamplerOptions{Temperature: 1, TopK: 40, TopP: 0}, 1},
		{SamplerOptions{Temperature: 1, TopK: 0, TopP: 0}, 1},
		{SamplerOptions{Temperature: 1, TopK: 40, TopP: 0.5}, 40},
		{SamplerOptions{Temperature: 1, TopK: 7, TopP: 1}, 7},
	} {
		in := tc.in
		got := in.AsUserGave()
		want := tc.in
		want.TopK = tc.topK
		if got != want || in != tc.in {
			t.Errorf("%+v: got %+v, want %+v (and the options left as they were)", tc.in, got, want)
		}
	}
}

// A draw whose number is just below 1 can leave, by rounding, a remainder
// above every weight: it lands on the last candidate that has a weight,
// never on a -Inf one (a token a constraint removed). The logits are a case
// where the walk runs past the last finite weight (found by search).
func TestDrawNeverPicksMinusInf(t *testing.T) {
	l := []float32{-2.14565, 1.0132811, -2.9144568, 3.3928084, 2.8041203, -4.8236647, float32(math.Inf(-1))}
	s, err := NewSampler(SamplerOptions{Temperature: 0.7})
	if err != nil {
		t.Fatal(err)
	}
	if tok := s.SampleWith(l, nil, math.Nextafter(1, 0)); tok != 5 {
		t.Errorf("drew token %d with u just below 1, want 5 (the last with a weight)", tok)
	}
}
