package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model"
)

// Load opens the model file at path with its tokenizer and chat template,
// to serve under name (the file's name without .gguf when empty). Close the
// returned model.Loaded when done.
func Load(path, name string, o model.Options) (*Model, *model.Loaded, error) {
	o.Tokenizer = true
	lm, err := model.Load(path, o)
	if err != nil {
		return nil, nil, err
	}
	m, err := describe(lm, path, name)
	if err != nil {
		lm.Close()
		return nil, nil, err
	}
	return m, lm, nil
}

// describe is a loaded model as the server serves it.
func describe(lm *model.Loaded, path, name string) (*Model, error) {
	tok, err := lm.Tokenizer()
	if err != nil {
		return nil, err // it names the file
	}
	tmpl, err := chat.FromGGUF(lm.File)
	if err != nil {
		return nil, fmt.Errorf("%s: chat template: %w", path, err)
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	info := Info{Path: path, Size: lm.File.Size, Metadata: metadata(lm.File)}
	if st, err := os.Stat(path); err == nil {
		info.Modified = st.ModTime()
	}
	d := model.Describe(lm.File, false)
	info.Family = d.Architecture
	info.ParameterSize = paramSize(d.Params)
	if len(d.Types) > 0 {
		info.Quantization = d.Types[0].Type
	}
	return &Model{Name: name, Net: lm.Model, Tokenizer: tok, Template: tmpl, Info: info}, nil
}

// metadata is the file's scalar metadata, and the length of its arrays
// (the vocabulary is too large to list), as Ollama's model_info shows it.
func metadata(f *gguf.File) map[string]any {
	out := make(map[string]any, len(f.KV))
	for _, kv := range f.KV {
		if kv.Key == "tokenizer.chat_template" {
			continue // /api/show has it as "template"
		}
		if kv.Value.Type() == gguf.TypeArray {
			out[kv.Key] = nil // Ollama leaves the arrays out unless verbose
			continue
		}
		out[kv.Key] = kv.Value.Interface()
	}
	return out
}

// paramSize writes a parameter count as Ollama does: "15.7B", "236M".
func paramSize(n int64) string {
	switch {
	case n >= 1e9:
		return trimFloat(float64(n)/1e9) + "B"
	case n >= 1e6:
		return trimFloat(float64(n)/1e6) + "M"
	case n >= 1e3:
		return trimFloat(float64(n)/1e3) + "K"
	}
	return fmt.Sprint(n)
}

func trimFloat(x float64) string {
	s := fmt.Sprintf("%.1f", x)
	return strings.TrimSuffix(s, ".0")
}
