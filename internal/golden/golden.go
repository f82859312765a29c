// Package golden reads the reference files under ../shared/golden (see its
// README) that tests compare latent against, so that each format is parsed in
// one place.
package golden

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
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
