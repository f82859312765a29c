package deepseek2

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/backend/cpu"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
)

// preparer is the CPU backend, taking stacked weights as the CUDA backend
// does, that keeps what Prepare was told and what it was then handed.
type preparer struct {
	stacker
	told    []backend.WeightShape
	cache   backend.CacheShape
	handed  []backend.WeightShape
	prepped int // Prepare calls
	early   bool
}

func (p *preparer) Prepare(ws []backend.WeightShape, c backend.CacheShape) {
	p.prepped++
	p.early = len(p.handed) == 0
	p.told, p.cache = ws, c
}

func (p *preparer) Weight(name string, typ quant.Type, dims []uint64, data []byte) (backend.Weight, error) {
	p.handed = append(p.handed, backend.WeightShape{Name: name, Type: typ, Dims: dims})
	return p.stacker.Weight(name, typ, dims, data)
}

func (p *preparer) StackedWeight(name string, typ quant.Type, dims []uint64, parts ...[]byte) (backend.Weight, error) {
	p.handed = append(p.handed, backend.WeightShape{Name: name, Type: typ, Dims: dims})
	return p.stacker.StackedWeight(name, typ, dims, parts...)
}

func (p *preparer) Cache(layers, positions, width int) (backend.Cache, error) {
	if got := (backend.CacheShape{Layers: layers, Positions: positions, Width: width}); got != p.cache {
		p.cache = backend.CacheShape{} // told another cache than asked for
	}
	return p.stacker.Cache(layers, positions, width)
}

// Prepare is told, before the first weight, exactly the weights the load
// then hands over (names, types and shapes, in order: stacked ones, an
// older conversion's split kv_b, a next-token block left out) and the
// cache it then asks for.
func TestPrepareToldWhatLoadHands(t *testing.T) {
	for _, name := range []string{"tiny-youtu-q4_0", "tiny-dsv2-f16", "tiny-dsv2-q8_0", "tiny-dsv2-legacy-f32", "tiny-glm-q4_k_m", "tiny-glm-nextn-q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(goldenModels, name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			be := cpu.New(1)
			defer be.Close()
			p := &preparer{stacker: stacker{be}}
			m, err := Load(f, p, 48)
			if err != nil {
				t.Fatal(err)
			}
			if p.prepped != 1 || !p.early {
				t.Fatalf("Prepare called %d times, before the first weight %v; want once, before", p.prepped, p.early)
			}
			if len(p.handed) < 10 || !reflect.DeepEqual(p.told, p.handed) {
				t.Fatalf("Prepare was told %d weights, the load handed %d:\ntold   %v\nhanded %v", len(p.told), len(p.handed), p.told, p.handed)
			}
			want := backend.CacheShape{Layers: m.Config.DecoderLayers(), Positions: 48, Width: m.Config.CacheRow()}
			if p.cache != want {
				t.Fatalf("Prepare was told the cache %+v, the load asked for %+v", p.cache, want)
			}
		})
	}
}
