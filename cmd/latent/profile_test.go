package main

import (
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend/cuda"
)

// Without a GPU, profile fails with one line naming the CUDA backend; with
// one, it lists the step's kernels and a total.
func TestProfile(t *testing.T) {
	out, err := runLatent(t, "profile", goldenModel("tiny-glm-q4_0"), "--depth", "8", "--each")
	if cuda.Available() != nil {
		if err == nil || !strings.Contains(err.Error(), "cuda backend") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %v, want one line about the cuda backend", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decode step at depth 8", "mmvq1_T_Q4_0", "attn_partial", "step"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
