package cuda

import (
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

// aheadUnit is a unit whose compile Prepare queued. Whoever claims it (a
// worker of Prepare's, or a load that needs it before a worker came to it)
// compiles it, sets bin, hit, err and end, and closes done.
type aheadUnit struct {
	defs    string // the model's defines it compiles with (its source: unitSource)
	u       unit
	claimed atomic.Bool
	done    chan struct{}
	bin     []byte
	hit     bool
	err     error
	end     time.Time
}

// errClosedEarly is a queued unit's error once the backend closed before a
// worker came to it.
var errClosedEarly = errors.New("cuda: the backend closed before the unit compiled")

// Prepare starts compiling every unit of the model's kernels, from the
// shapes of the weights the model will hand over and of its cache, so that
// the compile runs beside the upload (seconds for a large file: 22-27 s for
// glm-4.7-flash's 17 GB) instead of after it (backend.Preparer). Plan then
// takes each unit it needs from these compiles where its source, the
// model's defines included, is the same; one whose source came out
// different (shapes Prepare was not told) compiles then, as without
// Prepare, so being told wrong costs only the wasted compiles.
//
// Every unit is queued, as every unit compiles at a load anyway (those a
// decode step does not launch in the background), in order: the units
// every pass needs (the costliest first), then the one-token products
// (about half of them a step launches), then the rest. A core's worker
// takes them in that order; a load that needs a unit no worker has come to
// yet compiles it itself (claim), so the ones it does not need never
// delay it.
func (b *Backend) Prepare(ws []backend.WeightShape, c backend.CacheShape) {
	if b.ahead != nil || b.kv != nil || b.kernels != nil {
		return
	}
	defs, us, ok := b.prepared(ws, c)
	if !ok {
		return
	}
	arch, devKey := b.target()
	b.ahead, b.aheadStart = map[string]*aheadUnit{}, time.Now()
	queue := make(chan *aheadUnit, len(us))
	for _, u := range us {
		a := &aheadUnit{defs: defs, u: u, done: make(chan struct{})}
		b.ahead[u.name] = a
		queue <- a
	}
	close(queue)
	for range min(runtime.NumCPU(), len(b.ahead)) {
		go func() {
			for a := range queue {
				if b.aheadStop.Load() {
					if a.claimed.CompareAndSwap(false, true) {
						a.err = errClosedEarly
						close(a.done)
					}
					continue
				}
				a.compile(arch, devKey, nil)
			}
		}()
	}
}

// compile compiles a, taking one of slots where set, unless someone
// claimed it first (it then returns at once); either way its answer comes
// with done.
func (a *aheadUnit) compile(arch, devKey string, slots chan struct{}) {
	if !a.claimed.CompareAndSwap(false, true) {
		return
	}
	if slots != nil {
		slots <- struct{}{}
		defer func() { <-slots }()
	}
	a.bin, a.hit, a.err = compileUnit(a.defs, a.u, arch, devKey)
	a.end = time.Now()
	close(a.done)
}

// prepared is what Prepare compiles for the model told: its defines and
// every unit, in the order they are queued (ok false where a weight's type
// has no kernels: the load refuses it). It works on a Backend of the same
// device that holds the weights' shapes alone, through the functions
// compile uses on the bound weights.
func (b *Backend) prepared(ws []backend.WeightShape, c backend.CacheShape) (defs string, us []unit, ok bool) {
	v := &Backend{d: b.d, info: b.info, types: map[quant.Type]bool{}}
	for _, s := range ws {
		if _, ok := deviceTypes[s.Type]; !ok || len(s.Dims) == 0 {
			return "", nil, false
		}
		t := storedType(s.Type, s.Dims)
		v.types[t] = true
		v.weights = append(v.weights, &weight{name: s.Name, typ: t, dims: s.Dims})
	}
	v.kv = &kvCache{layers: c.Layers, positions: c.Positions, width: c.Width, esize: cacheElement(b.HalfCache)}
	v.kvl = v.latentWidth()
	defs, waited, later := v.unitPlan(nil)
	// the one-token products last; before them the costliest first, so that
	// fewer cores than units end sooner (NVRTC 12.4, one core, glm's shapes:
	// attn_decode 0.75 s, an mmvq8 unit 0.43-0.70, the others 0.17-0.43)
	rank := func(u unit) int {
		switch {
		case u.oneToken:
			return 3
		case u.name == "attn_decode":
			return 0
		case u.batchOf != "":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(waited, func(x, y unit) int { return rank(x) - rank(y) })
	us = append(waited, later...)
	if _, mt, _, _, _, ok := v.mlaShape(); ok {
		us = append(us, mlaUnit(mt))
	}
	return defs, us, true
}

// aheadOf is the compile Prepare queued of unit u with the model's defines,
// or nil where it queued none or one of another source (the source is the
// defines, the unit's own and its files, which the binary holds).
func (b *Backend) aheadOf(defs string, u unit) *aheadUnit {
	if a := b.ahead[u.name]; a != nil && a.u == u && a.defs == defs {
		return a
	}
	return nil
}

// storedType is the type a weight of typ and dims is kept in on the device
// (hostWeight): vectors in float32, which the kernels read them as;
// matrices as they are.
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
