package cuda

import (
	"runtime"
	"slices"
	"time"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

// aheadUnit is a unit whose compile Prepare started: bin, hit and err are
// set, and end is when, once done is closed.
type aheadUnit struct {
	src  string
	done chan struct{}
	bin  []byte
	hit  bool
	err  error
	end  time.Time
}

// Prepare starts compiling every unit of the model's kernels, from the
// shapes of the weights the model will hand over and of its cache, so that
// the compile runs beside the upload (seconds for a large file: 22-27 s for
// glm-4.7-flash's 17 GB) instead of after it (backend.Preparer). Plan then
// takes each unit it needs from these compiles where its source, the
// model's defines included, is the same; one whose source came out
// different (shapes Prepare was not told) compiles then, as without
// Prepare, so being told wrong costs only the wasted compiles. Every unit
// starts, as every unit compiles at a load anyway (those a step does not
// launch in the background): the ones a load waits for first.
func (b *Backend) Prepare(ws []backend.WeightShape, c backend.CacheShape) {
	if b.ahead != nil || b.kv != nil || b.kernels != nil {
		return
	}
	v := &Backend{d: b.d, info: b.info, types: map[quant.Type]bool{}}
	for _, s := range ws {
		if _, ok := deviceTypes[s.Type]; !ok || len(s.Dims) == 0 {
			return // the load refuses it
		}
		t := storedType(s.Type, s.Dims)
		v.types[t] = true
		v.weights = append(v.weights, &weight{name: s.Name, typ: t, dims: s.Dims})
	}
	v.kv = &kvCache{layers: c.Layers, positions: c.Positions, width: c.Width, esize: cacheElement(b.HalfCache)}
	v.kvl = v.latentWidth()
	defs, waited, later := v.unitPlan(nil)
	// the one-token products after the rest: their units are the cheapest,
	// and a step launches about half of them
	slices.SortStableFunc(waited, func(x, y unit) int {
		switch {
		case x.oneToken == y.oneToken:
			return 0
		case y.oneToken:
			return -1
		}
		return 1
	})
	us := append(waited, later...)
	if _, mt, _, _, _, ok := v.mlaShape(); ok {
		us = append(us, mlaUnit(mt))
	}
	arch, devKey := b.target()
	b.ahead, b.aheadStart = map[string]*aheadUnit{}, time.Now()
	slots := make(chan struct{}, max(1, runtime.NumCPU()))
	for _, u := range us {
		src, err := unitSource(defs, u)
		if err != nil {
			continue // compileModules meets the same error
		}
		a := &aheadUnit{src: src, done: make(chan struct{})}
		b.ahead[u.name] = a
		go func() {
			defer close(a.done)
			slots <- struct{}{}
			defer func() { <-slots }()
			a.bin, a.hit, a.err = compileUnit(defs, u, arch, devKey)
			a.end = time.Now()
		}()
	}
}

// aheadOf is the compile Prepare started of unit u with the model's defines,
// or nil where it started none or one of another source.
func (b *Backend) aheadOf(defs string, u unit) *aheadUnit {
	a := b.ahead[u.name]
	if a == nil {
		return nil
	}
	if src, err := unitSource(defs, u); err != nil || src != a.src {
		return nil
	}
	return a
}

// storedType is the type a weight of typ and dims is kept in on the device:
// vectors in float32, which the kernels read them as; matrices as they are.
func storedType(typ quant.Type, dims []uint64) quant.Type {
	if len(dims) == 1 {
		return quant.F32
	}
	return typ
}

// cacheElement is the latent cache's element size: f16 or float32.
func cacheElement(half bool) int64 {
	if half {
		return 2
	}
	return 4
}
