package synth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
	"github.com/latent-ai/latent/tokenizer"
)

func writeMem(t testing.TB, opts Options) (*Model, []byte) {
	t.Helper()
	var buf bytes.Buffer
	m, n, err := Write(context.Background(), &buf, opts)
	if err != nil {
		t.Fatalf("Write(%+v): %v", opts, err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("Write reported %d bytes, wrote %d", n, buf.Len())
	}
	return m, buf.Bytes()
}

func meanStd(x []float32) (mean, std float64) {
	var s, s2 float64
	for _, v := range x {
		s += float64(v)
		s2 += float64(v) * float64(v)
	}
	n := float64(len(x))
	mean = s / n
	return mean, math.Sqrt(max(0, s2/n-mean*mean))
}

// TestWeightStatistics dequantizes every tensor of tiny files in each format
// and checks the distributions that keep activations near unit scale:
// matrices N(0, 1/fan_in), untied embeddings N(0, 1), tied ones N(0, 1/dim),
// norms about 1.
func TestWeightStatistics(t *testing.T) {
	for _, tc := range []struct {
		preset string
		format Format
	}{
		{"tiny-glm", F32}, {"tiny-glm", F16}, {"tiny-glm", BF16}, {"tiny-glm", Q8_0},
		{"tiny-glm", Q4_0}, {"tiny-glm", Q4_K_M}, {"tiny-youtu", Q4_0}, {"tiny-dsv2", Q4_K_M},
	} {
		t.Run(tc.preset+"-"+tc.format.String(), func(t *testing.T) {
			m, data := writeMem(t, Options{Preset: tc.preset, Format: tc.format, Seed: 7})
			f, err := gguf.Parse("synth", data)
			if err != nil {
				t.Fatal(err)
			}
			dim := float64(m.Config.Dim)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				vals := make([]float32, ti.Elements())
				if err := quant.Dequantize(ti.Type, f.TensorData(ti), vals); err != nil {
					t.Fatalf("%s: %v", ti.Name, err)
				}
				mean, std := meanStd(vals)
				wantMean, wantStd, tol := 0.0, 1/math.Sqrt(float64(ti.Dims[0])), 0.06
				switch {
				case strings.HasSuffix(ti.Name, "norm.weight"):
					wantMean, wantStd, tol = 1, 0.1, 0.35
				case strings.HasSuffix(ti.Name, "exp_probs_b.bias"):
					if mean > 0.02 || std > 0.1 {
						t.Errorf("%s: mean %.3f std %.3f, want small negative bias", ti.Name, mean, std)
					}
					continue
				case ti.Name == "token_embd.weight" && m.Preset.Tied:
					wantStd = 1 / math.Sqrt(dim)
				case ti.Name == "token_embd.weight":
					wantStd = 1
				}
				if ti.Type == quant.Q4_0 || ti.Type == quant.Q4_K {
					tol = max(tol, 0.1) // 4-bit rounding noise
				}
				if math.Abs(mean-wantMean) > 0.05*wantStd+5*wantStd/math.Sqrt(float64(len(vals))) {
					t.Errorf("%s (%s): mean %.4f, want %.4f", ti.Name, ti.Type, mean, wantMean)
				}
				if math.Abs(std/wantStd-1) > tol {
					t.Errorf("%s (%s): std %.4f, want %.4f ±%.0f%%", ti.Name, ti.Type, std, wantStd, tol*100)
				}
			}
		})
	}
}

// TestActivationScale runs one dense matrix–vector product on a real-shape
// layer's weights and checks that a unit-scale input gives a unit-scale output.
func TestActivationScale(t *testing.T) {
	m, data := writeMem(t, Options{Preset: "tiny-youtu", Format: Q4_0, Seed: 3})
	f, err := gguf.Parse("synth", data)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("blk.0.ffn_down.weight")
	w := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, f.TensorData(ti), w); err != nil {
		t.Fatal(err)
	}
	in, out := int(ti.Dims[0]), int(ti.Dims[1])
	r := rng{42}
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.norm())
	}
	y := make([]float32, out)
	for o := range y {
		var s float64
		for i, v := range w[o*in : (o+1)*in] {
			s += float64(v) * float64(x[i])
		}
		y[o] = float32(s)
	}
	if _, std := meanStd(y); std < 0.8 || std > 1.2 {
		t.Errorf("%s: output std %.3f for unit input, want ≈1 (dim %d)", ti.Name, std, m.Config.Dim)
	}
}

// TestVocab checks the tokenizer of every preset, real sizes included.
func TestVocab(t *testing.T) {
	for _, p := range Presets() {
		t.Run(p.Name, func(t *testing.T) {
			start := time.Now()
			v, err := BuildVocab(p.Tokenizer, p.Config.Vocab)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("building %d tokens took %v", p.Config.Vocab, el)
			}
			if len(v.Tokens) != p.Config.Vocab || len(v.Types) != len(v.Tokens) {
				t.Fatalf("%d tokens, %d types, want %d", len(v.Tokens), len(v.Types), p.Config.Vocab)
			}
			ids := make(map[string]int, len(v.Tokens))
			for i, s := range v.Tokens {
				if j, dup := ids[s]; dup {
					t.Fatalf("token %q at %d and %d", s, j, i)
				}
				ids[s] = i
			}
			for b := 0; b < 256; b++ {
				if want := tokenizer.ByteToken(byte(b)); v.Tokens[b] != want {
					t.Fatalf("token %d is %q, want byte token %q", b, v.Tokens[b], want)
				}
			}
			ordinary := 256 + len(v.Merges)
			nspec := max(p.Tokenizer.SpecialCount, len(p.Tokenizer.Specials))
			if ordinary+nspec != len(v.Tokens) {
				t.Fatalf("256 + %d merges + %d specials != %d tokens", len(v.Merges), nspec, len(v.Tokens))
			}
			for i, mg := range v.Merges {
				a, b, ok := strings.Cut(mg, " ")
				if !ok || a == "" || b == "" || strings.Contains(b, " ") {
					t.Fatalf("merge %d %q is not \"a b\"", i, mg)
				}
				ia, oka := ids[a]
				ib, okb := ids[b]
				if !oka || !okb || ia >= 256+i || ib >= 256+i {
					t.Fatalf("merge %d %q: parts are not earlier tokens (%d, %d)", i, mg, ia, ib)
				}
				if v.Tokens[256+i] != a+b {
					t.Fatalf("merge %d %q: token %d is %q", i, mg, 256+i, v.Tokens[256+i])
				}
			}
			for i, typ := range v.Types {
				want := TokenNormal
				if i >= ordinary {
					want = TokenControl
				}
				if typ != want {
					t.Fatalf("token %d %q has type %d, want %d", i, v.Tokens[i], typ, want)
				}
			}
			for i, s := range p.Tokenizer.Specials {
				if v.Tokens[ordinary+i] != s {
					t.Errorf("special %d is %q, want %q", i, v.Tokens[ordinary+i], s)
				}
			}
			if v.BOS < ordinary || v.EOS < ordinary || v.BOS == v.EOS {
				t.Errorf("bos %d eos %d: not distinct special tokens (specials start at %d)", v.BOS, v.EOS, ordinary)
			}
			if v.Tokens[v.BOS] != p.Tokenizer.Specials[p.Tokenizer.BOS] || v.Tokens[v.EOS] != p.Tokenizer.Specials[p.Tokenizer.EOS] {
				t.Errorf("bos %q eos %q", v.Tokens[v.BOS], v.Tokens[v.EOS])
			}
			// The corpus must have taught real merges before the synthetic growth.
			if _, ok := ids["Ġthe"]; !ok {
				t.Errorf("no learned token for \" the\"")
			}
		})
	}
}

// TestRealPresets plans each real-shape preset (no weights drawn) and checks
// sizes and the type fallbacks at real row lengths.
func TestRealPresets(t *testing.T) {
	tests := []struct {
		opts          Options
		params        float64 // billions of weights
		tensor, typ   string
		layers, nextN int
	}{
		{Options{Preset: "youtu-llm-2b", Format: Q4_0}, 1.96, "blk.31.ffn_down.weight", "Q4_0", 32, 0},
		{Options{Preset: "deepseek-v2-lite", Format: Q4_K_M}, 15.7, "blk.5.ffn_down_exps.weight", "Q8_0", 27, 0},
		{Options{Preset: "deepseek-v2-lite", Format: Q4_K_M}, 15.7, "blk.0.ffn_down.weight", "Q8_0", 27, 0},
		{Options{Preset: "glm-4.7-flash", Format: Q4_K_M}, 29.9, "blk.46.ffn_down_exps.weight", "Q6_K", 47, 0},
		{Options{Preset: "glm-4.7-flash", Format: Q4_0, MTP: true}, 30.5, "blk.47.nextn.eh_proj.weight", "Q4_0", 48, 1},
		{Options{Preset: "glm-4.7-flash", Format: Q4_0}, 29.9, "output.weight", "Q6_K", 47, 0},
	}
	for _, tc := range tests {
		m, err := Plan(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for i := range m.Tensors {
			n += m.Tensors[i].Elements()
		}
		if got := float64(n) / 1e9; math.Abs(got/tc.params-1) > 0.03 {
			t.Errorf("%s: %.2f B weights, want about %.2f B", tc.opts.Preset, got, tc.params)
		}
		found := false
		for _, ti := range m.Tensors {
			if ti.Name == tc.tensor {
				found = true
				if ti.Type.String() != tc.typ {
					t.Errorf("%s %s: %s is %s, want %s", tc.opts.Preset, tc.opts.Format, ti.Name, ti.Type, tc.typ)
				}
			}
		}
		if !found {
			t.Errorf("%s: no tensor %s", tc.opts.Preset, tc.tensor)
		}
		if m.Config.Layers != tc.layers || m.Config.NextN != tc.nextN {
			t.Errorf("%s: %d layers (%d NextN), want %d (%d)", tc.opts.Preset, m.Config.Layers, m.Config.NextN, tc.layers, tc.nextN)
		}
		if m.Config.Vocab != len(m.Vocab.Tokens) {
			t.Errorf("%s: vocab %d, %d tokens", tc.opts.Preset, m.Config.Vocab, len(m.Vocab.Tokens))
		}
	}
	// The benchmark input the notes quote: GLM-4.7-Flash at Q4_0 is about 17 GB.
	m, _ := Plan(Options{Preset: "glm-4.7-flash", Format: Q4_0})
	if gb := float64(m.DataSize()) / 1e9; gb < 16 || gb > 18 {
		t.Errorf("glm-4.7-flash q4_0: %.1f GB of tensor data, want about 17", gb)
	}
}

func TestPlanOptions(t *testing.T) {
	tests := []struct {
		opts                 Options
		layers, dense, nextN int
		legacy               bool
		wantErr, errMentions string
	}{
		{opts: Options{Preset: "glm-4.7-flash", Layers: 2}, layers: 2, dense: 1},
		{opts: Options{Preset: "glm-4.7-flash", Layers: 1}, layers: 1, dense: 1},
		{opts: Options{Preset: "youtu-llm-2b", Layers: 4}, layers: 4, dense: 4},
		{opts: Options{Preset: "tiny-youtu", Layers: 5, MTP: true}, layers: 6, dense: 5, nextN: 1},
		{opts: Options{Preset: "tiny-dsv2", LegacyKVB: true}, layers: 3, dense: 1, legacy: true},
		{opts: Options{Preset: "nope"}, wantErr: `unknown preset "nope"`, errMentions: "glm-4.7-flash"},
		{opts: Options{Preset: "tiny-glm", Layers: -1}, wantErr: "layer count -1", errMentions: "1 to 256"},
		{opts: Options{Preset: "tiny-glm", Layers: 100000}, wantErr: "layer count 100000", errMentions: "1 to 256"},
		{opts: Options{Preset: "tiny-glm", Format: Format(42)}, wantErr: "unknown weight type", errMentions: "q4_k_m"},
	}
	for _, tc := range tests {
		m, err := Plan(tc.opts)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.errMentions) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Plan(%+v) error %v, want one line with %q and %q", tc.opts, err, tc.wantErr, tc.errMentions)
			}
			continue
		}
		if err != nil {
			t.Errorf("Plan(%+v): %v", tc.opts, err)
			continue
		}
		c := m.Config
		if c.Layers != tc.layers || c.LeadingDense != tc.dense || c.NextN != tc.nextN || c.Legacy != tc.legacy {
			t.Errorf("Plan(%+v): layers %d dense %d nextn %d legacy %v", tc.opts, c.Layers, c.LeadingDense, c.NextN, c.Legacy)
		}
		// Tensors exist for exactly the blocks the Config has.
		last := ""
		for _, ti := range m.Tensors {
			if strings.HasPrefix(ti.Name, "blk.") {
				last = ti.Name
			}
		}
		if want := "blk." + strconv.Itoa(c.Layers-1) + "."; !strings.HasPrefix(last, want) {
			t.Errorf("Plan(%+v): last block tensor %s, want %s*", tc.opts, last, want)
		}
	}
	if _, err := ParseFormat("q5_k"); err == nil || !strings.Contains(err.Error(), "f32, f16, bf16, q8_0, q4_0, q4_k_m") {
		t.Errorf("ParseFormat(q5_k) = %v", err)
	}
	for _, f := range []Format{F32, F16, BF16, Q8_0, Q4_0, Q4_K_M} {
		if g, err := ParseFormat(strings.ToUpper(f.String())); err != nil || g != f {
			t.Errorf("ParseFormat(%s) = %v, %v", f, g, err)
		}
	}
}

func TestDeterminism(t *testing.T) {
	opts := Options{Preset: "tiny-dsv2", Format: Q4_0, Seed: 11}
	_, a := writeMem(t, opts)
	opts.Workers = 5 // scheduling must not matter
	_, b := writeMem(t, opts)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different bytes")
	}
	opts.Seed = 12
	_, c := writeMem(t, opts)
	if bytes.Equal(a, c) {
		t.Error("different seeds, same bytes")
	}
	if len(a) != len(c) {
		t.Errorf("sizes %d and %d differ with the seed", len(a), len(c))
	}
	// Tensors must not repeat each other: each draws its own blocks.
	f, err := gguf.Parse("a", a)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Tensor("blk.1.ffn_gate_shexp.weight")
	u, _ := f.Tensor("blk.1.ffn_up_shexp.weight")
	if bytes.Equal(f.TensorData(q), f.TensorData(u)) {
		t.Error("two tensors of the same shape have the same bytes")
	}
}

func TestChatTemplate(t *testing.T) {
	_, data := writeMem(t, Options{Preset: "tiny-glm", Format: Q8_0, ChatTemplate: "{{ messages }}"})
	f, err := gguf.Parse("t", data)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Get("tokenizer.chat_template"); !ok {
		t.Error("no tokenizer.chat_template")
	} else if s, _ := v.String(); s != "{{ messages }}" {
		t.Errorf("chat_template %q", s)
	}
	_, data = writeMem(t, Options{Preset: "tiny-glm", Format: Q8_0})
	if f, _ = gguf.Parse("t", data); f != nil {
		if _, ok := f.Get("tokenizer.chat_template"); ok {
			t.Error("chat_template written without one given")
		}
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestAtomicWrite checks that the destination is written whole or not at all.
func TestAtomicWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	opts := Options{Preset: "tiny-glm", Format: Q4_0}

	// Missing directory: a clear error and nothing created.
	if _, _, err := WriteFile(context.Background(), filepath.Join(dir, "missing", "m.gguf"), opts); err == nil ||
		!strings.Contains(err.Error(), "missing") {
		t.Errorf("missing directory: %v", err)
	}

	// An existing file survives a failed (cancelled) rewrite untouched.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := opts
	o.Progress = func(done, total int64) {
		if done > total/3 {
			cancel()
		}
	}
	if _, _, err := WriteFile(ctx, path, o); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("cancelled write: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("existing file changed by a failed write: %d bytes", len(b))
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Errorf("files left after a failed write: %v", names)
	}

	// A write error mid-stream is reported and leaves nothing behind.
	if _, err := func() (int64, error) {
		m, err := Plan(opts)
		if err != nil {
			return 0, err
		}
		return m.WriteTo(context.Background(), &failAfter{n: 100000})
	}(); err == nil || !errors.Is(err, errDiskFull) {
		t.Errorf("failing writer: %v", err)
	}

	// Success replaces the file and leaves no temporary behind.
	if _, n, err := WriteFile(context.Background(), path, opts); err != nil {
		t.Fatal(err)
	} else if fi, err := os.Stat(path); err != nil || fi.Size() != n || fi.Mode().Perm() != 0o644 {
		t.Errorf("written file: %v, %v (want %d bytes, mode 0644)", fi, err, n)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Errorf("files after success: %v", names)
	}
	if _, _, err := WriteFile(context.Background(), dir, opts); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory as output: %v", err)
	}

	// A symbolic link's target is replaced (the link stays), keeping the
	// target's permissions.
	target, link := filepath.Join(dir, "target.gguf"), filepath.Join(dir, "link.gguf")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.gguf", link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if _, n, err := WriteFile(context.Background(), link, opts); err != nil {
		t.Fatal(err)
	} else if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link after a write through it: %v, %v", fi, err)
	} else if fi, err := os.Stat(target); err != nil || fi.Size() != n || fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target: %v, %v (want %d bytes, mode 0600)", fi, err, n)
	}
	// A link that leads nowhere is refused and stays a link.
	dangling := filepath.Join(dir, "dangling.gguf")
	if err := os.Symlink("nowhere/m.gguf", dangling); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteFile(context.Background(), dangling, opts); err == nil || !strings.Contains(err.Error(), "is a symbolic link that leads to no file") {
		t.Errorf("dangling link as output: %v", err)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the dangling link after a refused write: %v, %v", fi, err)
	}
}

var errDiskFull = errors.New("disk full")

type failAfter struct{ n int }

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

// BenchmarkSynth measures the generator without the disk: a Youtu-LLM-2B
// shape cut to 4 layers (about 270 MB at Q4_0).
func BenchmarkSynth(b *testing.B) {
	for _, f := range []Format{Q4_0, Q4_K_M, F16} {
		b.Run(f.String(), func(b *testing.B) {
			m, err := Plan(Options{Preset: "youtu-llm-2b", Format: f, Layers: 4})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(m.DataSize())
			b.ResetTimer()
			for range b.N {
				if _, err := m.WriteTo(context.Background(), io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
