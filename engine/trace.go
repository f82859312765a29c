package engine

import (
	"fmt"
	"slices"

	"github.com/latent-ai/latent/backend"
)

// Trace is the golden-logits record of a run: the logits at every prompt
// position from one batched prefill, then one entry per decode step.
type Trace struct {
	Vocab        int         `json:"vocab"`
	Prompt       []int32     `json:"prompt"`
	PromptLogits [][]float32 `json:"prompt_logits"`
	Steps        []Step      `json:"steps"`
}

// Step is one decode step: the token consumed and the logits it produced.
type Step struct {
	Token  int32     `json:"token"`
	Logits []float32 `json:"logits"`
}

// RunTrace prefills prompt, then decodes steps tokens (keeping copies of the
// logits, which a Model may reuse at its next Forward). Each step consumes
// feed[i] when given, else the argmax of the previous logits, so a comparison
// with another implementation cannot drift apart at a near-tie.
func RunTrace(m Model, prompt []int32, steps int, feed []int32) (*Trace, error) {
	if err := CheckPrompt(prompt, m.Vocab(), m.Context(), steps); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if len(feed) > steps {
		return nil, fmt.Errorf("trace: %d fed tokens for %d steps", len(feed), steps)
	}
	m.Reset()
	V := m.Vocab()
	logits, err := m.Forward(prompt, true)
	if err != nil {
		return nil, err
	}
	logits = slices.Clone(logits)
	tr := &Trace{Vocab: V, Prompt: prompt}
	for i := range prompt {
		tr.PromptLogits = append(tr.PromptLogits, logits[i*V:(i+1)*V])
	}
	last := tr.PromptLogits[len(prompt)-1]
	for s := 0; s < steps; s++ {
		tok := backend.Argmax(last)
		if s < len(feed) {
			tok = feed[s]
		}
		if last, err = m.Forward([]int32{tok}, false); err != nil {
			return nil, fmt.Errorf("step %d: %w", s, err)
		}
		last = slices.Clone(last)
		tr.Steps = append(tr.Steps, Step{Token: tok, Logits: last})
	}
	return tr, nil
}
