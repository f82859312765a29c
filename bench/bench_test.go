package bench

import (
	"slices"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/engine"
)

// recorder is an engine.Model that logs where each Forward starts and how
// many tokens it runs, so a test can check what each timing covered.
type recorder struct {
	ctx, pos int
	calls    [][2]int // start position, tokens
}

func (r *recorder) Forward(t []int32, all bool) ([]float32, error) {
	r.calls = append(r.calls, [2]int{r.pos, len(t)})
	r.pos += len(t)
	return make([]float32, r.Vocab()), nil
}
func (r *recorder) Vocab() int       { return 7 }
func (r *recorder) Context() int     { return r.ctx }
func (r *recorder) Position() int    { return r.pos }
func (r *recorder) Reset()           { r.pos = 0 }
func (r *recorder) truncateTo(n int) { r.pos = min(r.pos, n) }

// truncating is a recorder that can cut its cache back, as deepseek2's can.
type truncating struct{ *recorder }

func (t truncating) Truncate(n int) { t.truncateTo(n) }

// pipelined is a truncating recorder with engine.Pipelined's queued steps,
// the path the CUDA backend's models take.
type pipelined struct{ truncating }

type answer int32

func (a answer) Wait() int32 { return int32(a) }

func (p pipelined) ForwardArgmax(t []int32) (int32, error) {
	_, err := p.Forward(t, false)
	return 0, err
}

func (p pipelined) StartArgmax(t []int32) (backend.Pending, error) {
	if t == nil {
		t = []int32{0} // the answer of the pass before
	}
	_, err := p.Forward(t, false)
	return answer(0), err
}

// TestDecodeStartsAtDepth checks that the decode timing starts from a cache
// of exactly the depth (llama-bench's tg test), not from behind the prompt,
// after one untimed step there (llama-bench's warm-up), whether the model
// can truncate its cache or has to be refilled, and for a pipelined model.
func TestDecodeStartsAtDepth(t *testing.T) {
	be := cpu.New(1)
	for _, kind := range []string{"truncating", "refilled", "pipelined"} {
		r := &recorder{ctx: 2000}
		trunc := kind != "refilled"
		var m engine.Model = r
		switch kind {
		case "truncating":
			m = truncating{r}
		case "pipelined":
			m = pipelined{truncating{r}}
		}
		o := Options{Prefill: 5, Decode: 3, Depths: []int{0, 600}, Reps: 2}
		res, err := Run(m, be, "rec", o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0].Depth != 0 || res[1].Depth != 600 {
			t.Fatalf("%s: results %+v", kind, res)
		}
		// Each depth and repetition: fill (batches of at most 512; a later
		// repetition only cuts back, where the model can), the prompt at
		// the depth, [refill], a warm-up step at the depth, [refill], then
		// the timed one-token steps from the depth.
		var want [][2]int
		for _, d := range o.Depths {
			fill := func() {
				for done := 0; done < d; done += min(512, d-done) {
					want = append(want, [2]int{done, min(512, d-done)})
				}
			}
			for rep := range o.Reps {
				if rep == 0 || !trunc {
					fill()
				}
				want = append(want, [2]int{d, o.Prefill})
				// back to the depth, one untimed step, back again
				if !trunc {
					fill()
				}
				want = append(want, [2]int{d, 1})
				if !trunc {
					fill()
				}
				for i := range o.Decode {
					want = append(want, [2]int{d + i, 1})
				}
			}
		}
		if !slices.Equal(r.calls, want) {
			t.Errorf("%s: forward calls (position, tokens)\n got %v\nwant %v", kind, r.calls, want)
		}
	}
}

var _ engine.Pipelined = pipelined{} // else Run would take the plain path

var _ engine.Truncater = truncating{} // else Run would refill the cache
