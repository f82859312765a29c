package model

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
)

// Options choose how a model is loaded.
type Options struct {
	Backend string // "cpu", "cuda" or "auto" ("" = auto)
	Threads int    // CPU workers; 0 = one per core
	Context int    // cache positions; 0 = min(trained context, 4096)
}

// Loaded is an open model file, its network and the backend running it.
type Loaded struct {
	File    *gguf.File
	Model   *deepseek2.Model
	Backend backend.Backend
}

// Close releases the backend and the file mapping.
func (l *Loaded) Close() error {
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
	if threads < 0 {
		return nil, fmt.Errorf("threads: %d is negative (0: one per core)", threads)
	}
	switch name {
	case "cpu":
		return cpu.New(threads), nil
	case "cuda":
		be, err := cuda.New(0)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: %w", err)
		}
		return be, nil
	case "", "auto":
		if cuda.Available() == nil {
			if be, err := cuda.New(0); err == nil {
				return be, nil
			}
		}
		return cpu.New(threads), nil
	}
	return nil, fmt.Errorf("unknown backend %q (available: auto, cpu, cuda)", name)
}

// Load opens path and loads its network.
func Load(path string, o Options) (*Loaded, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	be, err := NewBackend(o.Backend, o.Threads)
	if err != nil {
		f.Close()
		return nil, err
	}
	m, err := deepseek2.Load(f, be, o.Context)
	if err != nil {
		be.Close()
		f.Close()
		return nil, err
	}
	return &Loaded{File: f, Model: m, Backend: be}, nil
}
