package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/quant"
)

// Drawing 30 billion Gaussians and quantizing them would take many minutes
// on two cores (hours for the K-quants). Instead each (type, scale) gets a pool of blocks
// quantized once from N(0, 1), and tensors are filled by copying pool blocks
// picked by a fast seeded generator: the values have the right distribution,
// every chunk is independent of scheduling (same seed, same bytes), and the
// writer runs at disk speed.

const (
	floatEntry  = 32      // values per pool entry for plain float types
	minRunBytes = 128     // consecutive pool bytes copied per random pick
	chunkBytes  = 2 << 20 // tensor bytes one job produces
)

// rng is splitmix64: tiny state, good statistics, and a stream defined here
// (not by a library version), so files stay reproducible across Go releases.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// norm draws from N(0, 1) by Box–Muller.
func (r *rng) norm() float64 {
	u := (float64(r.next()>>11) + 0.5) / (1 << 53) // (0, 1): log never sees 0
	v := float64(r.next()>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
}

// mix derives an independent seed from a seed and labels.
func mix(seed uint64, labels ...uint64) uint64 {
	r := rng{seed}
	h := r.next()
	for _, l := range labels {
		r = rng{h ^ (l * 0xd6e8feb86659fd93)}
		h = r.next()
	}
	return h
}

// pool holds n entries of unit values each, encoded as one type.
type pool struct {
	unit, entryBytes, n int
	run                 int // entries copied per pick
	data                []byte
}

type poolKey struct {
	typ quant.Type
	std float64
}

// scaleFields lists the byte offsets of the f16 scales in one block of the
// block types synth writes. Every value of such a block is linear in these
// scales, so multiplying them rescales the block without quantizing again.
func scaleFields(t quant.Type) []int {
	switch t {
	case quant.Q4_0, quant.Q5_0, quant.Q8_0:
		return []int{0} // d
	case quant.Q4_1, quant.Q5_1, quant.Q4_K, quant.Q5_K:
		return []int{0, 2} // d, then the minimum (or its super-block scale)
	case quant.Q6_K:
		return []int{208} // d after 128 + 64 bytes of quants and 16 scales
	}
	return nil
}

func isFloat(t quant.Type) bool { return t == quant.F32 || t == quant.F16 || t == quant.BF16 }

// poolValues is the number of N(0, 1) values behind the pool of type t:
// thousands of entries, fewer for the K-quants, whose quantizer is slow.
func poolValues(t quant.Type) (unit, values int) {
	switch {
	case isFloat(t):
		return floatEntry, 1 << 16
	case t.BlockSize() >= quant.QK_K:
		return t.BlockSize(), 256 * t.BlockSize()
	}
	return t.BlockSize(), 8192 * t.BlockSize()
}

// buildPools builds every pool the model's tensors draw from. The base pool
// of each block type is quantized once (in parallel: K-quants take a while);
// other scales are derived from it by rescaling the block scales.
func buildPools(m *Model) (map[poolKey]*pool, error) {
	type base struct {
		vals []float32
		data []byte // quantized at scale 1, for rescalable types
		err  error
	}
	bases := map[quant.Type]*base{}
	var keys []poolKey
	seen := map[poolKey]bool{}
	for i := range m.Tensors {
		t := &m.Tensors[i]
		k := poolKey{t.Type, t.std}
		if t.kind != initGauss || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		if bases[t.Type] == nil {
			bases[t.Type] = &base{}
		}
	}
	var wg sync.WaitGroup
	for typ, b := range bases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, nvals := poolValues(typ)
			r := rng{mix(m.Options.Seed, 0x706f6f6c, uint64(typ))}
			b.vals = make([]float32, nvals)
			for j := range b.vals {
				b.vals[j] = float32(r.norm())
			}
			if scaleFields(typ) != nil {
				b.data = make([]byte, nvals/typ.BlockSize()*typ.TypeSize())
				b.err = quant.Quantize(typ, b.vals, b.data)
			}
		}()
	}
	wg.Wait()
	pools := make(map[poolKey]*pool, len(keys))
	for _, k := range keys {
		b := bases[k.typ]
		if b.err != nil {
			return nil, fmt.Errorf("%s weights: %w", k.typ, b.err)
		}
		unit, nvals := poolValues(k.typ)
		eb := k.typ.TypeSize() * unit / k.typ.BlockSize()
		p := &pool{unit: unit, entryBytes: eb, n: nvals / unit, run: max(1, minRunBytes/eb), data: make([]byte, nvals/k.typ.BlockSize()*k.typ.TypeSize())}
		if offs := scaleFields(k.typ); offs != nil {
			copy(p.data, b.data)
			ts := k.typ.TypeSize()
			for blk := 0; blk < len(p.data); blk += ts {
				for _, o := range offs {
					d := quant.F16ToF32(binary.LittleEndian.Uint16(p.data[blk+o:]))
					binary.LittleEndian.PutUint16(p.data[blk+o:], quant.F32ToF16(float32(float64(d)*k.std)))
				}
			}
		} else {
			scaled := make([]float32, len(b.vals))
			for j, v := range b.vals {
				scaled[j] = float32(float64(v) * k.std)
			}
			if err := quant.Quantize(k.typ, scaled, p.data); err != nil {
				return nil, fmt.Errorf("%s weights: %w", k.typ, err)
			}
		}
		pools[k] = p
	}
	return pools, nil
}

// job is one chunk of one tensor: values [e0, e1).
type job struct {
	t      *Tensor
	e0, e1 int64
	seed   uint64
	buf    []byte
	err    error
	done   chan struct{}
}

// fill draws the job's values into its buffer.
func fill(j *job, pools map[poolKey]*pool) error {
	t := j.t
	r := rng{j.seed}
	if t.kind == initDirect {
		vals := make([]float32, j.e1-j.e0)
		for i := range vals {
			vals[i] = float32(t.mean + t.std*r.norm())
		}
		return quant.Quantize(t.Type, vals, j.buf)
	}
	p := pools[poolKey{t.Type, t.std}]
	span := p.n - p.run + 1
	// The multiply-shift maps 32 random bits onto [0, span) without a division.
	dst := j.buf
	for len(dst) > 0 {
		k := int((r.next() >> 32) * uint64(span) >> 32)
		dst = dst[copy(dst, p.data[k*p.entryBytes:(k+p.run)*p.entryBytes]):]
	}
	return nil
}

// chunkValues is how many values of t one job covers: about chunkBytes.
func chunkValues(t *Tensor, pools map[poolKey]*pool) int64 {
	if t.kind == initDirect {
		return t.Elements()
	}
	p := pools[poolKey{t.Type, t.std}]
	return max(1, int64(chunkBytes/p.entryBytes)) * int64(p.unit)
}

// countingWriter counts the bytes that reach w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteTo streams the model as a GGUF file to w and returns the bytes
// written. Memory stays at a few chunks whatever the model's size.
func (m *Model) WriteTo(ctx context.Context, w io.Writer) (int64, error) {
	pools, err := buildPools(m)
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: w}
	gw := gguf.NewWriter(cw)
	for _, kv := range m.Meta {
		if err := gw.SetKV(kv.Key, kv.Value); err != nil {
			return cw.n, err
		}
	}
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if err := gw.AddTensor(t.Name, t.Type, t.Dims...); err != nil {
			return cw.n, err
		}
	}
	if err := gw.WriteHeader(); err != nil {
		return cw.n, fmt.Errorf("write header: %w", err)
	}
	if err := m.writeData(ctx, gw, pools); err != nil {
		return cw.n, err
	}
	if err := gw.Close(); err != nil {
		return cw.n, fmt.Errorf("finish file: %w", err)
	}
	return cw.n, nil
}

// writeData runs the pipeline: one goroutine cuts tensors into jobs, workers
// fill them, and this goroutine writes them in order. Buffers circulate
// through a free list, which bounds memory and stalls the workers when the
// disk is the bottleneck.
func (m *Model) writeData(ctx context.Context, gw *gguf.Writer, pools map[poolKey]*pool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := m.Options.Workers
	if workers <= 0 {
		workers = 2
	}
	nbuf := 2*workers + 2
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- nil // allocated on first use
	}
	work := make(chan *job, nbuf)
	order := make(chan *job, nbuf)
	var wg sync.WaitGroup
	wg.Add(1 + workers)
	go func() {
		defer wg.Done()
		defer close(work)
		defer close(order)
		for ti := range m.Tensors {
			t := &m.Tensors[ti]
			per := chunkValues(t, pools)
			n := t.Elements()
			for ci, e0 := uint64(0), int64(0); e0 < n; ci, e0 = ci+1, e0+per {
				e1 := min(n, e0+per)
				size, _ := t.Type.RowBytes(e1 - e0) // chunks are whole blocks
				var buf []byte
				select {
				case buf = <-free:
				case <-ctx.Done():
					return
				}
				if int64(cap(buf)) < size {
					buf = make([]byte, max(size, chunkBytes))
				}
				j := &job{t: t, e0: e0, e1: e1, seed: mix(m.Options.Seed, uint64(ti), ci), buf: buf[:size], done: make(chan struct{})}
				select {
				case order <- j:
				case <-ctx.Done():
					return
				}
				select {
				case work <- j:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	for range workers {
		go func() {
			defer wg.Done()
			for j := range work {
				j.err = fill(j, pools)
				close(j.done)
			}
		}()
	}
	err := func() error {
		total, done := m.DataSize(), int64(0)
		for j := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			select {
			case <-j.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if j.err != nil {
				return fmt.Errorf("tensor %s: %w", j.t.Name, j.err)
			}
			if _, err := gw.Write(j.buf); err != nil {
				return fmt.Errorf("write tensor %s: %w", j.t.Name, err)
			}
			done += int64(len(j.buf))
			free <- j.buf
			if m.Options.Progress != nil {
				m.Options.Progress(done, total)
			}
		}
		return ctx.Err()
	}()
	cancel()
	wg.Wait()
	return err
}

// Write plans the model for opts and streams it to w.
func Write(ctx context.Context, w io.Writer, opts Options) (*Model, int64, error) {
	m, err := Plan(opts)
	if err != nil {
		return nil, 0, err
	}
	n, err := m.WriteTo(ctx, w)
	return m, n, err
}
