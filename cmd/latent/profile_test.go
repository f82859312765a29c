package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend/cuda"
)

// Without a GPU, profile fails with one line naming the CUDA backend; with
// one, it lists the step's kernels and a total.
func TestProfile(t *testing.T) {
	out, err := runLatent(t, "profile", goldenModel("tiny-glm-q4_0"), "--depth", "8", "--each")
	if cuda.Available() != nil {
		// Profile takes no --backend: the driver's advice to use one is cut.
		if err == nil || !strings.Contains(err.Error(), "needs an NVIDIA GPU") || strings.Contains(err.Error(), "--backend cpu,") ||
			strings.HasSuffix(err.Error(), "--backend cpu") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %v, want one line saying profile needs an NVIDIA GPU", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decode step at depth 8", "mmv1_", "attn_decode", "step"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Bad flags fail before the GPU is looked for, with or without one.
func TestProfileErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--depth", "-1"}, "--depth -1, --top 15: must not be negative"},
		{[]string{"--top", "-1"}, "--depth 0, --top -1: must not be negative"},
		{[]string{"--depth", "999999999999999999"}, "--depth 999999999999999999: more than 1073741824 tokens"},
	} {
		_, err := runLatent(t, append([]string{"profile", goldenModel("tiny-glm-q4_0")}, tc.args...)...)
		checkError(t, fmt.Sprint(tc.args), err, tc.want)
	}
}
