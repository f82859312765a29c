package model

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/sysmem"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/tokenizer"
)

// Options choose how a model is loaded.
type Options struct {
	Backend string // "cpu", "cuda" or "auto" ("" = auto)
	Threads int    // CPU workers; 0 = one per core
	Context int    // cache positions; 0 = min(trained context, 4096)
	// Progress, when set, is called as the file's tensors are handed to the
	// backend (uploaded to a GPU, repacked for the CPU) with the bytes done
	// so far and the bytes of all the file's tensors. Tensors the network
	// does not use (a next-token-prediction layer) leave done short of
	// total.
	Progress func(done, total int64)
	// Tokenizer, when set, also builds the file's tokenizer while the
	// network loads (Loaded.Tokenizer): a large vocabulary takes a good
	// part of a second's cold start to index.
	Tokenizer bool
}

// MaxThreads bounds the CPU workers, as ggml does (GGML_MAX_N_THREADS): each
// worker has scratch as long as the context, and a million goroutines helps
// nobody.
const MaxThreads = 512

// Loaded is an open model file, its network and the backend running it.
type Loaded struct {
	File    *gguf.File
	Model   *deepseek2.Model
	Backend backend.Backend
	tok     *pendingTokenizer // started by Load with Options.Tokenizer
}

// pendingTokenizer is a tokenizer being built from a file in the background.
type pendingTokenizer struct {
	done chan struct{}
	tok  *tokenizer.Tokenizer
	err  error
}

func buildTokenizer(f *gguf.File) *pendingTokenizer {
	p := &pendingTokenizer{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tok, p.err = tokenizer.FromGGUF(f)
	}()
	return p
}

// wait returns once the build no longer reads the file.
func (p *pendingTokenizer) wait() {
	if p != nil {
		<-p.done
	}
}

// Tokenizer is the file's tokenizer: the one Load started building, or,
// without Options.Tokenizer, one built now.
func (l *Loaded) Tokenizer() (*tokenizer.Tokenizer, error) {
	if l.tok == nil {
		return tokenizer.FromGGUF(l.File)
	}
	l.tok.wait()
	return l.tok.tok, l.tok.err
}

// Close releases the backend and the file mapping.
func (l *Loaded) Close() error {
	l.tok.wait()
	err := l.Backend.Close()
	if cerr := l.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// NewBackend starts the backend named by name: "cpu", "cuda" (the first
// NVIDIA GPU; an error says what to install when the driver or NVRTC is
// missing), or "auto" (CUDA when a device is usable, else the CPU).
func NewBackend(name string, threads int) (backend.Backend, error) {
	switch {
	case threads < 0:
		return nil, fmt.Errorf("threads: %d is negative (0: one per core)", threads)
	case threads > MaxThreads:
		return nil, fmt.Errorf("threads: %d is more than %d (0: one per core)", threads, MaxThreads)
	}
	if name != "cpu" && name != "cuda" && name != "" && name != "auto" {
		return nil, fmt.Errorf("unknown backend %q (available: auto, cpu, cuda)", name)
	}
	// a bad setting of a backend that may run is an error (auto: either)
	if name != "cuda" {
		if err := cpu.CheckEnv(); err != nil {
			return nil, err
		}
	}
	if name != "cpu" {
		if err := cuda.CheckEnv(); err != nil {
			return nil, err
		}
	}
	switch name {
	case "cpu":
		return cpu.New(threads), nil
	case "cuda":
		be, err := cuda.New(0)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: %w; or use --backend cpu", err)
		}
		return be, nil
	}
	if cuda.Available() == nil {
		if be, err := cuda.New(0); err == nil {
			return be, nil
		}
	}
	return cpu.New(threads), nil
}

// Load opens path and loads its network.
func Load(path string, o Options) (*Loaded, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	var tok *pendingTokenizer
	if o.Tokenizer {
		tok = buildTokenizer(f)
	}
	be, err := NewBackend(o.Backend, o.Threads)
	if err != nil {
		tok.wait()
		f.Close()
		return nil, err
	}
	c, err := deepseek2.ConfigFrom(f)
	if err == nil {
		err = checkMemory(c, be, o.Context)
	}
	var m *deepseek2.Model
	if err == nil {
		m, err = deepseek2.New(f, c, be, o.Context, progressOf(f, o.Progress))
	}
	if err != nil {
		tok.wait()
		be.Close()
		f.Close()
		return nil, err
	}
	return &Loaded{File: f, Model: m, Backend: be, tok: tok}, nil
}

// progressOf is fn with the total bytes of f's tensors bound in, or nil.
func progressOf(f *gguf.File, fn func(done, total int64)) func(int64) {
	if fn == nil {
		return nil
	}
	var total int64
	for _, t := range f.Tensors {
		total += t.Size
	}
	return func(done int64) { fn(done, total) }
}

// checkMemory refuses a CPU cache for ctx positions that is larger than the
// machine's memory: allocating it would end the process with a runtime
// trace, or swap. (The CUDA backend reports its own out-of-memory; a context
// past the trained one is deepseek2.New's error.)
func checkMemory(c *deepseek2.Config, be backend.Backend, ctx int) error {
	if be.Name() != "cpu" || ctx <= 0 || ctx > c.ContextLength {
		return nil
	}
	threads := 1
	if t, ok := be.(interface{ Threads() int }); ok {
		threads = t.Threads()
	}
	return cacheFits(c.DecoderLayers(), ctx, c.CacheRow(), threads, sysmem.Physical())
}

// cacheFits checks that the CPU backend's float32 latent cache (layers × ctx
// rows of row values) and its attention scratch (ctx floats per worker) fit
// in mem bytes (0: unknown, not checked).
func cacheFits(layers, ctx, row, threads int, mem uint64) error {
	need := 4 * (float64(layers)*float64(ctx)*float64(row) + float64(threads)*float64(ctx))
	if mem == 0 || need <= float64(mem) {
		return nil
	}
	return fmt.Errorf("ctx %d: the latent cache needs %.1f GB, more than this machine's %.1f GB of memory (lower --ctx)", ctx, need/1e9, float64(mem)/1e9)
}
