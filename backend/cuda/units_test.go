package cuda

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// Every kernel the backend can launch has a unit for unitOf to find it in,
// for a model with any one fast weight type: mqLaunch's products over token
// counts, gate/up or not, widths and problem counts; the one-token
// attention kernels for the types they serve; and the fixed kernels. (That
// the unit defines the kernel is TestKernelsCompile's part, where NVRTC
// is.) This needs neither NVRTC nor a GPU.
func TestEveryLaunchedKernelHasAUnit(t *testing.T) {
	b := &Backend{mmv1Names: map[[4]int]string{}}
	b.info.SMs = 132
	fixed := []string{"add", "argmax", "attn_combine", "attn_partial", "cache_store", "kv_finish", "moe_combine", "moe_route",
		"moe_router", "moe_router8", "noop", "pick_draw", "pick_top", "prep", "quant_act", "rmsnorm", "rope", "swiglu"}
	for _, typ := range slices.Sorted(maps.Keys(fastTypes)) {
		names := []string{"gemv_" + deviceTypes[quant.F16], "gemm_" + deviceTypes[quant.F32], "embed_" + deviceTypes[typ]}
		names = append(names, fixed...)
		for _, T := range []int64{1, 3, 40} {
			for _, dual := range []bool{false, true} {
				for _, K := range []int64{256, 1536, 2048, 10944} {
					for _, N := range []int64{128, 2048, 151552} {
						for _, ny := range []int{1, 8} {
							m := &mq{typ: typ, T: T, K: K, N: N, ny: ny}
							if dual {
								m.w2 = 1
							}
							name, _, _ := b.mqLaunch(m)
							names = append(names, name)
						}
					}
				}
			}
		}
		if typ == quant.Q4_0 || typ == quant.Q8_0 { // decodeServes' types
			names = append(names, attnDecodeName(typ))
			for mt := 1; mt <= 2; mt++ {
				names = append(names, fmt.Sprintf("mla_decode%d_%s_%s", mt, deviceTypes[typ], deviceTypes[typ]))
			}
		}
		have := map[string]bool{}
		for _, u := range append(units([]string{deviceTypes[typ]}, true), mlaUnit(1), mlaUnit(2)) {
			have[u.name] = true
		}
		for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
			if !have[unitOf(n)] {
				t.Errorf("%s model: kernel %s maps to unit %q, which is not compiled", deviceTypes[typ], n, unitOf(n))
			}
		}
	}
}

// MLAFrom below 0 picks mla_decode from 1024 positions for heads that fill
// one 16-row tile and from 2048 for two (glm's 20: attn_decode measured
// faster to about 2600); a value set is kept, 0 included (the tests' "from
// the first position").
func TestMLAFromDefault(t *testing.T) {
	for _, c := range []struct{ set, heads, want int }{
		{-1, 16, 1024}, {-1, 8, 1024}, {-1, 20, 2048}, {-1, 32, 2048}, {0, 20, 0}, {5000, 16, 5000},
	} {
		if got := (&mlaBuffers{heads: c.heads}).from(c.set); got != c.want {
			t.Errorf("MLAFrom %d, %d heads: from %d, want %d", c.set, c.heads, got, c.want)
		}
	}
}

// batchTypes leaves out the types only the output (or the token
// embeddings an output may be tied to) and the vectors have, so that their
// eight-token units compile in the background; any matrix of a layer,
// 2-D or a 3-D stack of experts or heads, keeps its type's.
func TestBatchTypes(t *testing.T) {
	w := func(name string, typ quant.Type, dims ...uint64) *weight {
		return &weight{name: name, typ: typ, dims: dims}
	}
	for _, c := range []struct {
		weights []*weight
		want    []string
	}{
		{[]*weight{w("token_embd.weight", quant.Q4_0, 2048, 1000), w("output.weight", quant.Q6_K, 2048, 1000),
			w("blk.0.attn_norm.weight", quant.F32, 2048), w("blk.0.ffn_down.weight", quant.Q4_0, 1408, 2048)},
			[]string{"T_Q4_0"}},
		{[]*weight{w("output.weight", quant.Q6_K, 2048, 1000), w("blk.0.ffn_down_exps.weight", quant.Q6_K, 1408, 2048, 64),
			w("blk.0.attn_k_b.weight", quant.Q8_0, 128, 512, 16)},
			[]string{"T_Q6_K", "T_Q8_0"}},
		{[]*weight{w("token_embd.weight", quant.Q8_0, 2048, 1000), w("blk.3.ffn_gate.weight", quant.Q4_K, 2048, 5632)},
			[]string{"T_Q4_K"}},
	} {
		b := &Backend{weights: c.weights}
		if got := slices.Sorted(maps.Keys(b.batchTypes())); !slices.Equal(got, c.want) {
			t.Errorf("case with %s: batch types %v, want %v", c.weights[0].name, got, c.want)
		}
	}
}

// A model's routing unit compiles with the others only where it has MoE
// layers; the unit is the one the routing kernels are looked up in.
func TestRoutes(t *testing.T) {
	w := func(name string) *weight { return &weight{name: name, typ: quant.F32, dims: []uint64{2048, 64}} }
	for _, c := range []struct {
		weights []*weight
		want    bool
	}{
		{[]*weight{w("token_embd.weight"), w("blk.0.ffn_gate.weight"), w("blk.0.ffn_down.weight")}, false},
		{[]*weight{w("token_embd.weight"), w("blk.0.ffn_gate.weight"), w("blk.1.ffn_gate_inp.weight"), w("blk.1.ffn_gate_exps.weight")}, true},
	} {
		if got := (&Backend{weights: c.weights}).routes(); got != c.want {
			t.Errorf("weights %s...: routes %v, want %v", c.weights[len(c.weights)-1].name, got, c.want)
		}
	}
	for _, k := range []string{"moe_route", "moe_router", "moe_router8"} {
		i := slices.IndexFunc(units([]string{"T_Q4_0"}, true), func(u unit) bool { return u.name == unitOf(k) })
		if i < 0 || !units([]string{"T_Q4_0"}, true)[i].moe {
			t.Errorf("%s: its unit %q is not a unit marked moe", k, unitOf(k))
		}
	}
}

// A load waits for the units any pass may need and for the one-token
// products its decode step launched; the other one-token products, an
// eight-token unit of an output-only type and a dense model's routing
// compile in the background. Without a plan every one-token product is
// waited for.
func TestUnitsWaited(t *testing.T) {
	us := map[string]unit{}
	for _, u := range units([]string{"T_Q4_0", "T_Q6_K"}, true) {
		us[u.name] = u
	}
	launched := map[string]bool{"mmv1_1_2_0_T_Q4_0": true, "mmvk1_T_Q6_K": true}
	batch := map[string]bool{"T_Q4_0": true}
	for _, c := range []struct {
		unit     string
		launched map[string]bool
		moe      bool
		want     bool
	}{
		{"basic", launched, true, true},
		{"attn_decode", launched, true, true},
		{"quant_act", launched, false, true},
		{"mmv1_1_2_0_T_Q4_0", launched, true, true},
		{"mmv1_4_2_0_T_Q4_0", launched, true, false},
		{"mmv1_4_2_0_T_Q4_0", nil, true, true},
		{"mmvk1_T_Q6_K", launched, true, true},
		{"mmvk1g_T_Q6_K", launched, true, false},
		{"mmvk1g_T_Q6_K", nil, true, true},
		{"mmvq8_T_Q4_0", launched, true, true},
		{"mmvq8_T_Q6_K", launched, true, false},
		{"router", launched, true, true},
		{"router", launched, false, false},
	} {
		u, ok := us[c.unit]
		if !ok {
			t.Fatalf("no unit %s", c.unit)
		}
		if got := u.waited(c.launched, batch, c.moe); got != c.want {
			t.Errorf("unit %s (plan %v, moe %v): waited %v, want %v", c.unit, c.launched != nil, c.moe, got, c.want)
		}
	}
}

// A step's mmv1 launch brings in the variants that differ from it only in
// G (a prompt's launch of many experts picks another), and nothing else.
func TestWithRowGroups(t *testing.T) {
	got := map[string]bool{"mmv1_1_2_0_T_Q4_0": true, "mmv1_1_8_0_T_Q4_0": true, "mmvk1_T_Q6_K": true}
	withRowGroups(got)
	want := []string{"mmv1_1_2_0_T_Q4_0", "mmv1_2_2_0_T_Q4_0", "mmv1_4_2_0_T_Q4_0", "mmv1_1_8_0_T_Q4_0", "mmvk1_T_Q6_K"}
	for _, k := range want {
		if !got[k] {
			t.Errorf("%s missing", k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d kernels, want %d: %v", len(got), len(want), got)
	}
}
