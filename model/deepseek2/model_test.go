package deepseek2_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/synth"
)

// The context asked for at load: 0 is the default, a negative one or one past
// the trained context (4096 for the tiny presets) is an error that says so,
// and nothing is allocated for it (--ctx 100000000 once died out of memory).
func TestLoadContext(t *testing.T) {
	f := synthFile(t, "tiny-youtu", synth.Q4_0)
	for _, tc := range []struct {
		ctx  int
		want int    // the context loaded, when no error
		err  string // the error's text
	}{
		{0, 4096, ""},
		{16, 16, ""},
		{4096, 4096, ""},
		{-5, 0, "context -5 is negative"},
		{4097, 0, "tiny.gguf: a context of 4097 positions is more than the model's trained context of 4096"},
		{100_000_000, 0, "a context of 100000000 positions is more than the model's trained context of 4096"},
		{1 << 62, 0, "more than the model's trained context"},
	} {
		be := cpu.New(1)
		m, err := deepseek2.Load(f, be, tc.ctx)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ctx %d: %v", tc.ctx, err)
		case tc.err == "" && m.Context() != tc.want:
			t.Errorf("ctx %d: context %d, want %d", tc.ctx, m.Context(), tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n")):
			t.Errorf("ctx %d: error %v, want one line with %q", tc.ctx, err, tc.err)
		}
		var trained *deepseek2.ErrContextTrained
		if tc.ctx > 4096 && (!errors.As(err, &trained) || trained.Asked != tc.ctx || trained.Trained != 4096) {
			t.Errorf("ctx %d: error %v is not an ErrContextTrained{%d, 4096}", tc.ctx, err, tc.ctx)
		}
		be.Close()
	}
}
