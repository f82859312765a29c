package cuda

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// The kernels compile with NVRTC for Hopper at the three target models'
// shapes with every weight type. This needs NVRTC only, not a GPU.
func TestKernelsCompile(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skipf("no NVRTC here: %v", err)
	}
	t.Setenv("LATENT_KERNEL_CACHE", t.TempDir())
	var types []string
	for _, n := range deviceTypes {
		types = append(types, "X("+n+")")
	}
	sort.Strings(types)
	defs := fmt.Sprintf("#define CACHE_W 576\n#define KV_LORA 512\n#define CACHE_HALF 1\n#define MAX_K 11008\n#define WEIGHT_TYPES(X) %s\n#define FAST_TYPES(X) X(T_Q4_0) X(T_Q8_0) X(T_Q4_K) X(T_Q5_K) X(T_Q6_K)\n", strings.Join(types, " ")) + drawDefines
	us := units([]string{"T_Q4_0", "T_Q8_0", "T_Q4_K", "T_Q5_K", "T_Q6_K"})
	start := time.Now()
	bins, hits, err := compileModules(defs, us, "sm_90", "test")
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	start = time.Now()
	_, hits2, err := compileModules(defs, us, "sm_90", "test")
	if err != nil {
		t.Fatal(err)
	}
	for i := range bins {
		if len(bins[i]) == 0 || hits[i] || !hits2[i] {
			t.Errorf("module %s: %d bytes, first hit %v, second hit %v", us[i].name, len(bins[i]), hits[i], hits2[i])
		}
	}
	t.Logf("cold compile %v, from the cache %v", cold, time.Since(start))
}

// LATENT_CACHE_TYPE picks the cache's element type; anything else is refused
// with a message naming the variable and the choices.
func TestHalfCache(t *testing.T) {
	for _, c := range []struct {
		v    string
		half bool
		err  string
	}{
		{"", true, ""}, {"f16", true, ""}, {"f32", false, ""},
		{"q8_0", false, "LATENT_CACHE_TYPE=q8_0: unknown cache type (f16 or f32)"},
	} {
		half, err := halfCache(c.v)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.v, err, c.err)
			}
			continue
		}
		if err != nil || half != c.half {
			t.Errorf("%q: half %v, error %v; want %v", c.v, half, err, c.half)
		}
	}
}
