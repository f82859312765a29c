package cuda

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model/deepseek2"
	"github.com/latent-ai/latent/quant"
)

// Prepare works from the types a weight will be kept in on the device
// (storedType), before any weight is uploaded: for every device type and
// shape, that is the type hostWeight, what an upload keeps, gives it.
func TestStoredTypeIsWhatTheDeviceKeeps(t *testing.T) {
	for typ := range deviceTypes {
		for _, dims := range [][]uint64{{256}, {256, 3}, {512, 2, 3}} {
			t.Run(fmt.Sprintf("%s%v", typ, dims), func(t *testing.T) {
				rb, err := typ.RowBytes(int64(dims[0]))
				if err != nil {
					t.Fatal(err)
				}
				rows := int64(1)
				for _, d := range dims[1:] {
					rows *= int64(d)
				}
				w, _, err := hostWeight("w", typ, dims, [][]byte{make([]byte, rows*rb)})
				if err != nil {
					t.Fatal(err)
				}
				if got := storedType(typ, dims); got != w.typ {
					t.Errorf("storedType says %s, the device keeps %s", got, w.typ)
				}
			})
		}
	}
}

// A load takes a unit from Prepare's compiles only where the source is the
// one it would compile: the same unit with the same model defines.
func TestAheadOnlyForTheSameSource(t *testing.T) {
	defs, _ := shapedAs(2048, quant.Q4_0).shapeDefines()
	other, _ := shapedAs(4096, quant.Q4_0).shapeDefines()
	us := units([]string{"T_Q4_0"}, true)
	b := &Backend{ahead: map[string]*aheadUnit{us[0].name: {defs: defs, u: us[0]}}}
	if b.aheadOf(defs, us[0]) == nil {
		t.Errorf("unit %s with the defines it was started with: not taken", us[0].name)
	}
	if b.aheadOf(other, us[0]) != nil {
		t.Errorf("unit %s with other defines (MAX_K): taken", us[0].name)
	}
	if b.aheadOf(defs, us[1]) != nil {
		t.Errorf("unit %s, not started: taken", us[1].name)
	}
	if (&Backend{}).aheadOf(defs, us[0]) != nil {
		t.Error("no Prepare: a unit taken")
	}
}

// recorder is the CPU backend taking stacked weights, as this backend does,
// keeping what Prepare was told and every weight then handed over.
type recorder struct {
	*cpu.CPU
	told   []backend.WeightShape
	cache  backend.CacheShape
	handed []handedWeight
}

type handedWeight struct {
	name  string
	typ   quant.Type
	dims  []uint64
	parts [][]byte
}

func (r *recorder) Prepare(ws []backend.WeightShape, c backend.CacheShape) { r.told, r.cache = ws, c }

func (r *recorder) Weight(name string, typ quant.Type, dims []uint64, data []byte) (backend.Weight, error) {
	r.handed = append(r.handed, handedWeight{name, typ, dims, [][]byte{data}})
	return r.CPU.Weight(name, typ, dims, data)
}

func (r *recorder) StackedWeight(name string, typ quant.Type, dims []uint64, parts ...[]byte) (backend.Weight, error) {
	r.handed = append(r.handed, handedWeight{name, typ, dims, parts})
	return r.CPU.Weight(name, typ, dims, slices.Concat(parts...))
}

// hopper is a Backend of an H200 that holds nothing: what compile reads of
// the device (the attention kernels need Hopper's clusters).
func hopper(half bool) *Backend {
	return &Backend{info: DeviceInfo{Name: "NVIDIA H200", Major: 9, SMs: 132, SharedPerBlockMax: 227 << 10, Driver: 13000},
		d: &driver{cuLaunchKernelEx: 1}, types: map[quant.Type]bool{}, HalfCache: half}
}

// What Prepare compiles, from the shapes a model tells it, is what the
// load would compile once the weights are up (hostWeight, what an upload
// keeps of each, then the cache): the same defines and the same units, the
// mla_decode unit included where the cache allows it.
func TestPreparedIsWhatTheBoundModelCompiles(t *testing.T) {
	mla := false
	for _, name := range []string{"tiny-youtu-q4_0", "tiny-youtu-f32", "tiny-dsv2-f16", "tiny-dsv2-q8_0", "tiny-dsv2-legacy-f32", "tiny-glm-q4_0", "tiny-glm-q4_k_m", "tiny-glm-nextn-q8_0"} {
		t.Run(name, func(t *testing.T) {
			r := loaded(t, name)
			for _, half := range []bool{true, false} {
				t.Run(fmt.Sprintf("half%v", half), func(t *testing.T) {
					bound := hopper(half)
					for _, h := range r.handed {
						w, _, err := hostWeight(h.name, h.typ, h.dims, h.parts)
						if err != nil {
							t.Fatal(err)
						}
						bound.types[w.typ] = true
						bound.weights = append(bound.weights, w)
					}
					bound.kv = &kvCache{layers: r.cache.Layers, positions: r.cache.Positions, width: r.cache.Width, esize: cacheElement(half)}
					bound.kvl = bound.latentWidth()
					defs, waited, later := bound.unitPlan(nil)
					want := append(waited, later...)
					if _, mt, _, _, _, ok := bound.mlaShape(); ok {
						want = append(want, mlaUnit(mt))
						mla = true
					}
					gotDefs, got, ok := hopper(half).prepared(r.told, r.cache)
					if !ok || gotDefs != defs {
						t.Fatalf("Prepare's defines (ok %v):\n%s\nthe bound model's:\n%s", ok, gotDefs, defs)
					}
					key := func(u unit) string { return u.name + "\n" + u.defs }
					if g, w := slices.Sorted(slices.Values(mapped(got, key))), slices.Sorted(slices.Values(mapped(want, key))); !slices.Equal(g, w) {
						t.Fatalf("Prepare's units %v, the bound model's %v", g, w)
					}
				})
			}
		})
	}
	if !mla {
		t.Error("no file had mla_decode's unit: its shape was not compared")
	}
}

func mapped[T, U any](xs []T, f func(T) U) []U {
	ys := make([]U, len(xs))
	for i, x := range xs {
		ys[i] = f(x)
	}
	return ys
}

// loaded is the golden file name loaded through a recorder (the file open
// until the test ends: the weights handed over point into it).
func loaded(t *testing.T, name string) *recorder {
	t.Helper()
	f, err := gguf.Open(goldenModel(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := deepseek2.ConfigFrom(f)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{CPU: cpu.New(1)}
	t.Cleanup(func() { r.Close() })
	if _, err := deepseek2.New(f, c, r, 64, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// told is what a load of the golden file tells Prepare.
func told(t *testing.T, name string) ([]backend.WeightShape, backend.CacheShape) {
	r := loaded(t, name)
	return r.told, r.cache
}

// Every unit Prepare queues gets an answer, whether a worker or the load
// comes to it first, and the load's answer is what compiling without
// Prepare gives (a cubin, or without NVRTC here the same error).
func TestPrepareAnswersEveryUnit(t *testing.T) {
	t.Setenv("LATENT_KERNEL_CACHE", t.TempDir())
	ws, c := told(t, "tiny-glm-q4_0")
	b := hopper(true)
	b.Prepare(ws, c)
	defs, us, ok := b.prepared(ws, c)
	if !ok || len(b.ahead) != len(us) {
		t.Fatalf("Prepare queued %d units of %d (ok %v)", len(b.ahead), len(us), ok)
	}
	arch, devKey := b.target()
	last := us[len(us)-3:] // the queue's end: the load likely comes to these first
	bins, _, err := b.compileModules(defs, last, arch, devKey)
	t.Setenv("LATENT_KERNEL_CACHE", t.TempDir()) // compiled afresh, not read from Prepare's
	wbins, _, werr := (&Backend{}).compileModules(defs, last, arch, devKey)
	if (err == nil) != (werr == nil) || err == nil && !slices.EqualFunc(bins, wbins, bytes.Equal) {
		t.Fatalf("through Prepare: %d cubins, error %v; without: %d, %v", len(bins), err, len(wbins), werr)
	}
	for _, u := range us {
		select {
		case <-b.ahead[u.name].done:
		case <-time.After(3 * time.Minute):
			t.Fatalf("unit %s never answered", u.name)
		}
	}
}

// A closed backend's queued units that no worker has come to answer with
// errClosedEarly (nothing waits for them forever) and do not compile.
func TestPrepareStopsAtClose(t *testing.T) {
	ws, c := told(t, "tiny-glm-q4_0")
	b := hopper(true)
	b.aheadStop.Store(true) // as Close does, before any worker has come to a unit
	b.Prepare(ws, c)
	for name, a := range b.ahead {
		<-a.done
		if a.err != errClosedEarly {
			t.Errorf("unit %s: %v, want errClosedEarly", name, a.err)
		}
	}
}

// Prepare queues the units every pass needs first, attn_decode (the
// costliest) at their head where the model has it, then the one-token
// products together, then the units a load does not wait for.
func TestPreparedOrder(t *testing.T) {
	ws, c := told(t, "tiny-glm-q4_0")
	_, us, ok := hopper(true).prepared(ws, c)
	if !ok || len(us) == 0 {
		t.Fatalf("nothing prepared (ok %v)", ok)
	}
	if us[0].name != "attn_decode" {
		t.Errorf("first unit %s, want attn_decode", us[0].name)
	}
	first := slices.IndexFunc(us, func(u unit) bool { return u.oneToken })
	last := first
	for i, u := range us {
		if u.oneToken {
			last = i
		}
	}
	if first < 1 || slices.ContainsFunc(us[first:last+1], func(u unit) bool { return !u.oneToken }) {
		t.Errorf("the one-token products are not one run after every pass's units: %v", mapped(us, func(u unit) string { return u.name }))
	}
}

// goldenModel is the golden model file name: under ../shared/golden, or
// under .golden where a device call carried a part of it (the float32
// files stay behind there, to fit the call: a model not carried is
// skipped, as the GPU golden test skips it).
func goldenModel(t *testing.T, name string) string {
	t.Helper()
	for _, d := range []string{"../../../shared/golden/models", "../../.golden/models"} {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		path := filepath.Join(d, name+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Skipf("%s: not carried here", path)
		}
		return path
	}
	t.Fatal("no golden models: neither ../shared/golden nor .golden")
	return ""
}
