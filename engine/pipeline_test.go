package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/model/deepseek2"
)

// syncModel hides StartArgmax: Generate waits for every token before it
// queues the next pass.
type syncModel struct{ *deepseek2.Model }

func (syncModel) StartArgmax() {} // a different signature: not an engine.Pipelined

// pipeModel counts the passes queued over a token the host had not seen.
type pipeModel struct {
	*deepseek2.Model
	blind int
}

func (p *pipeModel) StartArgmax(tokens []int32) (backend.Pending, error) {
	if tokens == nil {
		p.blind++
	}
	return p.Model.StartArgmax(tokens)
}

// loadGolden loads a golden model on be, or skips without the golden files.
func loadGolden(t *testing.T, name, be string, ctx int) *deepseek2.Model {
	t.Helper()
	path := filepath.Join("../../shared/golden/models", name+".gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no golden model: %v", err)
	}
	lm, err := model.Load(path, model.Options{Backend: be, Context: ctx, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return lm.Model
}

// generateIDs runs req on m and returns the ids of the tokens it gives.
func generateIDs(t *testing.T, m engine.Model, req engine.Request) []int32 {
	t.Helper()
	var ids []int32
	if _, err := engine.Generate(context.Background(), m, req, func(tk engine.Token) error {
		ids = append(ids, tk.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Pipelined greedy generation (each pass queued before its token is
// checked, the pass after the last token dropped) gives what waiting for
// every token gives: the same tokens, stop reason, count and cache, for
// each way a generation ends, and in a session that reuses the cache.
func TestPipelinedGreedySameAsSync(t *testing.T) {
	if _, ok := any(syncModel{}).(engine.Pipelined); ok {
		t.Fatal("syncModel is still an engine.Pipelined")
	}
	for _, name := range []string{"tiny-youtu-q4_0", "tiny-glm-q4_0", "tiny-dsv2-q8_0"} {
		t.Run(name, func(t *testing.T) {
			checkPipelined(t, name, "cpu")
		})
	}
}

func checkPipelined(t *testing.T, name, be string) {
	prompt := []int32{1, 17, 42, 99, 7}
	type outcome struct {
		toks     []int32
		res      engine.Result
		pos      int
		sessToks []int32
	}
	run := func(m engine.Model, req engine.Request) outcome {
		var o outcome
		emit := func(tk engine.Token) error {
			o.toks = append(o.toks, tk.ID)
			return nil
		}
		res, err := engine.Generate(context.Background(), m, req, emit)
		if err != nil {
			t.Fatal(err)
		}
		o.res, o.pos = *res, m.Position()
		emit = func(engine.Token) error { return nil }
		if res.StopReason == engine.StopContext {
			return o
		}
		// a session's second turn extends the first: the cache must be reusable
		s := engine.NewSession(m)
		if _, err := s.Generate(context.Background(), req, emit); err != nil {
			t.Fatal(err)
		}
		turn2 := append(slices.Clone(s.Tokens()), 5)
		req2 := req
		req2.Prompt = turn2
		res2, err := s.Generate(context.Background(), req2, emit)
		if err != nil {
			t.Fatal(err)
		}
		if res2.Cached != len(turn2)-1 {
			t.Errorf("second turn reused %d of %d tokens", res2.Cached, len(turn2)-1)
		}
		o.sessToks = slices.Clone(s.Tokens())
		return o
	}
	slow := syncModel{loadGolden(t, name, be, 128)}
	fast := &pipeModel{Model: loadGolden(t, name, be, 128)}
	ref := run(slow, engine.Request{Prompt: prompt, MaxTokens: 30}).toks
	if len(ref) != 30 {
		t.Fatalf("reference run gave %d tokens, want 30", len(ref))
	}
	for _, tc := range []struct {
		name string
		req  engine.Request
		ctx  int // a model of this context instead (0: 128)
	}{
		{"length", engine.Request{Prompt: prompt, MaxTokens: 30}, 0},
		{"one token", engine.Request{Prompt: prompt, MaxTokens: 1}, 0},
		{"eos", engine.Request{Prompt: prompt, MaxTokens: 30, EOG: []int32{ref[9]}}, 0},
		{"eos first", engine.Request{Prompt: prompt, MaxTokens: 30, EOG: []int32{ref[0]}}, 0},
		{"stop sequence", engine.Request{Prompt: prompt, MaxTokens: 30, Stop: [][]int32{ref[6:8]}}, 0},
		{"context full", engine.Request{Prompt: prompt}, len(prompt) + 12},
	} {
		s, f := engine.Model(slow), engine.Model(fast)
		if tc.ctx > 0 {
			s = syncModel{loadGolden(t, name, be, tc.ctx)}
			fast = &pipeModel{Model: loadGolden(t, name, be, tc.ctx)}
			f = fast
		}
		fast.blind = 0
		want, got := run(s, tc.req), run(f, tc.req)
		if !slices.Equal(got.toks, want.toks) {
			t.Errorf("%s: pipelined %v, sync %v", tc.name, got.toks, want.toks)
		}
		if got.res.StopReason != want.res.StopReason || got.res.Generated != want.res.Generated || got.pos != want.pos {
			t.Errorf("%s: pipelined %s after %d tokens at position %d, sync %s after %d at %d", tc.name,
				got.res.StopReason, got.res.Generated, got.pos, want.res.StopReason, want.res.Generated, want.pos)
		}
		if !slices.Equal(got.sessToks, want.sessToks) {
			t.Errorf("%s: session cache pipelined %v, sync %v", tc.name, got.sessToks, want.sessToks)
		}
		if want.res.Generated > 1 && fast.blind == 0 {
			t.Errorf("%s: no pass was queued ahead of its token", tc.name)
		}
	}
}
