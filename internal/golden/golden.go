// Package golden reads the reference files under ../shared/golden (see its
// README) that tests compare latent against, so that each format is parsed in
// one place.
package golden

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/latent-ai/latent/engine"
)

// Tokenization is one line of a tokenizer/*.jsonl file: a text and the ids
// llama.cpp gives it (special tokens parsed, no BOS).
type Tokenization struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

// ReadTokenizations reads a tokenizer/*.jsonl file.
func ReadTokenizations(path string) ([]Tokenization, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var cases []Tokenization
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20) // some texts are long
	for line := 1; sc.Scan(); line++ {
		var c Tokenization
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no tokenizations", path)
	}
	return cases, nil
}

// TemplateCase is one entry of templates/expected.json: a chat template's
// input and the text Python's jinja2 renders from it. Messages and Tools are
// the JSON as written (Tools nil when the case has none), for each test to
// decode as it needs.
type TemplateCase struct {
	Template string `json:"template"` // the .jinja file's name, without the extension
	Case     string `json:"case"`
	Input    struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
	} `json:"input"`
	BOSToken string `json:"bos_token"`
	EOSToken string `json:"eos_token"`
	Output   string `json:"output"`
}

// ReadTemplateCases reads templates/expected.json.
func ReadTemplateCases(path string) ([]TemplateCase, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cases []TemplateCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no template cases", path)
	}
	return cases, nil
}

// ReadTrace reads a logits/*.json file: llama.cpp's logits for a prompt and
// for greedy decode steps, in the form `latent logits` prints.
func ReadTrace(path string) (engine.Trace, error) {
	var tr engine.Trace
	raw, err := os.ReadFile(path)
	if err != nil {
		return tr, err
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		return tr, fmt.Errorf("%s: %w", path, err)
	}
	return tr, nil
}

// Tolerance is the largest logit deviation from llama.cpp that the golden
// README allows for each logits file: float32 weights differ only in
// summation order; for the others llama.cpp rounds activations to F16 or
// 8-bit blocks.
var Tolerance = map[string]float64{
	"tiny-youtu-f32":       1e-4,
	"tiny-glm-f32":         1e-4,
	"tiny-dsv2-legacy-f32": 1e-4,
	"tiny-dsv2-f16":        0.02,
	"tiny-dsv2-q8_0":       0.02,
	"tiny-glm-nextn-q8_0":  0.02,
	"tiny-youtu-q4_0":      0.1,
	"tiny-glm-q4_0":        0.1,
	"tiny-glm-q4_k_m":      0.1,
}
