package engine

import (
	"errors"
	"slices"
	"testing"
)

// RunTrace prefills the prompt, then takes each step's token from feed while
// it lasts and from the argmax of the last logits after; bad arguments and a
// failing step are errors that say which.
func TestRunTrace(t *testing.T) {
	m := &fakeModel{vocab: 8, ctx: 10, script: []int32{3, 5, 2, 6}}
	tr, err := RunTrace(m, []int32{1}, 3, []int32{7})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	for _, s := range tr.Steps {
		toks = append(toks, s.Token)
	}
	if want := []int32{7, 5, 2}; !slices.Equal(toks, want) {
		t.Errorf("step tokens %v, want %v (fed, then argmax)", toks, want)
	}
	if want := [][]int32{{1}, {7}, {5}, {2}}; !slices.EqualFunc(m.calls, want, slices.Equal[[]int32]) {
		t.Errorf("forward calls %v, want %v", m.calls, want)
	}
	if m.resets != 1 || len(tr.PromptLogits) != 1 || tr.Steps[2].Logits[6] != 5 {
		t.Errorf("resets %d, %d prompt rows, last step logits %v", m.resets, len(tr.PromptLogits), tr.Steps[2].Logits)
	}

	for _, c := range []struct {
		name         string
		prompt, feed []int32
		steps        int
		failAt       int
		want         string
	}{
		{"empty prompt", nil, nil, 1, 0, "trace: the prompt is empty"},
		{"more fed tokens than steps", []int32{1}, []int32{1, 2}, 1, 0, "trace: 2 fed tokens for 1 steps"},
		{"a step fails", []int32{1}, nil, 3, 3, "step 1: boom"},
	} {
		m := &fakeModel{vocab: 8, ctx: 10, failAt: c.failAt, forwardErr: errors.New("boom")}
		if _, err := RunTrace(m, c.prompt, c.steps, c.feed); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
