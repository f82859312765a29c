package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latent-ai/latent/quant"
)

// The kernels compile with NVRTC for Hopper at the three target models'
// shapes with every weight type, and every kernel is in the unit unitOf
// looks it up in, and in no other. This needs NVRTC only, not a GPU.
func TestKernelsCompile(t *testing.T) {
	if _, err := loadNVRTC(); err != nil {
		t.Skipf("no NVRTC here: %v", err)
	}
	t.Setenv("LATENT_KERNEL_CACHE", t.TempDir())
	defs, fast := shapedAs(11008, slices.Collect(maps.Keys(deviceTypes))...).shapeDefines()
	if !slices.Equal(fast, []string{"T_Q4_0", "T_Q4_K", "T_Q5_K", "T_Q6_K", "T_Q8_0"}) {
		t.Fatalf("fast types %v", fast)
	}
	us := append(units(fast, true), mlaUnit(1), mlaUnit(2))
	start := time.Now()
	bins, hits, err := (&Backend{}).compileModules(defs, us, "sm_90", "test")
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	start = time.Now()
	_, hits2, err := (&Backend{}).compileModules(defs, us, "sm_90", "test")
	if err != nil {
		t.Fatal(err)
	}
	for i := range bins {
		if len(bins[i]) == 0 || hits[i] || !hits2[i] {
			t.Errorf("module %s: %d bytes, first hit %v, second hit %v", us[i].name, len(bins[i]), hits[i], hits2[i])
		}
	}
	t.Logf("cold compile %v, from the cache %v", cold, time.Since(start))
	seen := map[string]string{}
	for i, bin := range bins {
		for _, k := range kernelNames(t, bin) {
			if u := unitOf(k); u != us[i].name {
				t.Errorf("kernel %s is in unit %s, but unitOf gives %s", k, us[i].name, u)
			}
			if other, ok := seen[k]; ok {
				t.Errorf("kernel %s is in units %s and %s", k, other, us[i].name)
			}
			seen[k] = us[i].name
		}
	}
	for _, k := range []string{"gemv_T_Q4_0", "gemm_T_Q6_K"} { // the fast types' products are mmv1's, mmvk1's and mmvq8's
		if seen[k] != "" {
			t.Errorf("unit %s holds %s, which no product launches", seen[k], k)
		}
	}
	for _, k := range []string{"rmsnorm", "quant_act", "mmv1_1_2_0_T_Q4_0", "mmv1_1_2_1_T_Q8_0", "mmvk1_T_Q6_K", "mmvk1g_T_Q4_K", "mmvq8_T_Q4_K", "attn_decode_T_Q8_0_T_Q8_0", "mla_decode2_T_Q4_0_T_Q4_0", "gemm_T_F16", "embed_T_Q4_0"} {
		if seen[k] == "" {
			t.Errorf("no unit holds %s", k)
		}
	}
	// A cache row with no rotated part (the tests' small backends) sizes
	// attn_decode's and mla_decode's rope arrays to zero unless they are
	// guarded.
	var att []unit
	for _, u := range us {
		if u.file == "attention.cu" {
			att = append(att, u)
		}
	}
	norope := strings.Replace(defs, "#define CACHE_W 576", "#define CACHE_W 512", 1)
	if len(att) != 4 || norope == defs {
		t.Fatalf("%d units of attention.cu, not 4, or no CACHE_W to change", len(att))
	}
	if _, _, err := (&Backend{}).compileModules(norope, att, "sm_90", "test"); err != nil {
		t.Errorf("no rotated part: %v", err)
	}
}

// shapedAs is a backend (no device) that knows what shapeDefines reads: a
// cache row of 576 values (kv_lora 512) in f16, the weight types, and a
// Q4_0 matrix whose rows are maxK values, the longest.
func shapedAs(maxK uint64, types ...quant.Type) *Backend {
	b := &Backend{types: map[quant.Type]bool{}, kv: &kvCache{width: 576, esize: 2}, kvl: 512,
		weights: []*weight{{name: "blk.0.ffn_down.weight", typ: quant.Q4_0, dims: []uint64{maxK, 2048}}}}
	for _, t := range types {
		b.types[t] = true
	}
	return b
}

// kernelNames are the entry points of a cubin: its global functions. The
// cubin's ELF header carries CUDA's own ABI version, which debug/elf
// refuses, so a copy gets the standard one.
func kernelNames(t *testing.T, cubin []byte) []string {
	t.Helper()
	b := append([]byte(nil), cubin...)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(b[20:], uint32(elf.EV_CURRENT)) // e_version
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("read cubin: %v", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("cubin symbols: %v", err)
	}
	var names []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && elf.ST_BIND(s.Info) == elf.STB_GLOBAL {
			names = append(names, s.Name)
		}
	}
	return names
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

// BenchmarkUnitCompile compiles, one at a time and with nothing cached, each
// unit of a file at glm-4.7-flash's shapes with Q4_0 layers and a Q6_K
// output (latent synth --type q4_0): what each unit costs a core, and so
// which one a cold start waits for last.
//
//	go test -run '^$' -bench UnitCompile -benchtime 1x ./backend/cuda
func BenchmarkUnitCompile(b *testing.B) {
	if _, err := loadNVRTC(); err != nil {
		b.Skipf("no NVRTC here: %v", err)
	}
	defs, fast := shapedAs(10240, quant.F32, quant.Q4_0, quant.Q6_K).shapeDefines()
	for _, u := range units(fast, true) {
		b.Run(u.name, func(b *testing.B) {
			for range b.N {
				b.Setenv("LATENT_KERNEL_CACHE", b.TempDir())
				if _, _, err := (&Backend{}).compileModules(defs, []unit{u}, "sm_90", "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
