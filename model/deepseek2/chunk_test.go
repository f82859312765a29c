package deepseek2_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// An input longer than a pass takes goes in several passes and gives what
// the same tokens give fed in shorter pieces of other lengths: every
// position's logits (all), the last position's (not all), and the argmax
// of a pipelined start.
func TestLongInputInPasses(t *testing.T) {
	const n, vocab = 1100, 1024
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32((i*7919 + 3) % vocab)
	}
	ref := loadSynth(t, "tiny-youtu", synth.Q4_0, n)
	var want []float32
	for _, r := range [][2]int{{0, 300}, {300, 600}, {600, n}} { // pieces of one pass each
		l, err := ref.Forward(toks[r[0]:r[1]], true)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l...)
	}
	V := ref.Vocab()

	m := loadSynth(t, "tiny-youtu", synth.Q4_0, n)
	got, err := m.Forward(toks, true) // passes of 512, 512 and 76
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n*V || m.Position() != n {
		t.Fatalf("%d logits at position %d, want %d at %d", len(got), m.Position(), n*V, n)
	}
	for i := 0; i < n; i++ {
		if d := maxDiff(got[i*V:(i+1)*V], want[i*V:(i+1)*V]); d > 1e-4 {
			t.Fatalf("position %d: logits differ by %g", i, d)
		}
	}

	m.Reset()
	last, err := m.Forward(toks, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(last, want[(n-1)*V:]); len(last) != V || d > 1e-4 {
		t.Fatalf("last logits: %d values, off by %g", len(last), d)
	}

	m.Reset()
	p, err := m.StartArgmax(toks)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Wait(), backend.Argmax(want[(n-1)*V:]); got != want {
		t.Fatalf("StartArgmax over %d tokens: %d, want %d", n, got, want)
	}
}

// A long input with a bad token or too long for the cache is refused
// before any pass: the model's position does not move.
func TestLongInputRefusedWhole(t *testing.T) {
	m := loadSynth(t, "tiny-youtu", synth.Q4_0, 1000)
	bad := make([]int32, 900)
	bad[700] = 5000
	if _, err := m.Forward(bad, false); err == nil || m.Position() != 0 {
		t.Fatalf("a token outside the vocabulary at 700: error %v, position %d", err, m.Position())
	}
	var full *deepseek2.ErrContextFull
	if _, err := m.Forward(make([]int32, 1001), false); !errors.As(err, &full) || m.Position() != 0 {
		t.Fatalf("1001 tokens in a context of 1000: error %v, position %d", err, m.Position())
	}
	if _, err := m.Forward(make([]int32, 1000), false); err != nil || m.Position() != 1000 {
		t.Fatalf("1000 tokens in a context of 1000: error %v, position %d", err, m.Position())
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// lowMemory is a CPU backend that runs out of memory for a pass's
// activations past rows tokens, as the CUDA backend does when the device
// is full.
type lowMemory struct {
	*cpu.CPU
	rows     int
	noArgmax bool // no memory left for ArgmaxAsync's answer either
}

func (b *lowMemory) ArgmaxAsync(logits backend.Tensor) backend.Pending {
	if b.noArgmax {
		panic(backend.OutOfMemory{Err: fmt.Errorf("out of memory for the argmax")})
	}
	return b.CPU.ArgmaxAsync(logits)
}

func (b *lowMemory) Tensor(rows, cols int) backend.Tensor {
	if rows > b.rows {
		panic(backend.OutOfMemory{Err: fmt.Errorf("out of memory for %d×%d activations", rows, cols)})
	}
	return b.CPU.Tensor(rows, cols)
}

// A backend out of memory mid-pass, or for the pick that ends it, makes the
// pass's error (no panic), the position stays, and a smaller pass then runs.
func TestOutOfMemoryIsAnError(t *testing.T) {
	be := &lowMemory{CPU: cpu.New(2), rows: 4}
	t.Cleanup(func() { be.Close() })
	m, err := deepseek2.Load(synthFile(t, "tiny-youtu", synth.Q4_0), be, 64)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Forward([]int32{1, 2, 3, 4, 5, 6}, false)
	var oom backend.OutOfMemory
	if !errors.As(err, &oom) || m.Position() != 0 {
		t.Fatalf("6 tokens on a backend with room for 4: error %v, position %d", err, m.Position())
	}
	if _, err := m.Forward([]int32{1, 2, 3}, false); err != nil || m.Position() != 3 {
		t.Fatalf("then 3 tokens: error %v, position %d", err, m.Position())
	}
	be.noArgmax = true
	if _, err := m.StartArgmax([]int32{4, 5}); !errors.As(err, &oom) || m.Position() != 3 {
		t.Fatalf("StartArgmax without memory for its answer: error %v, position %d", err, m.Position())
	}
	be.noArgmax = false
	if p, err := m.StartArgmax([]int32{4, 5}); err != nil || m.Position() != 5 {
		t.Fatalf("then StartArgmax: error %v, position %d", err, m.Position())
	} else {
		p.Wait()
	}
}
