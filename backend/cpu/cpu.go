// Package cpu is the portable backend: every operation in plain Go, split
// across all cores, reading quantized weights block by block straight from the
// memory-mapped model file (never a dequantized copy of a matrix).
package cpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/internal/sysmem"
	"github.com/latent-ai/latent/quant"
)

// CPU implements backend.Backend.
type CPU struct {
	pool *pool
	bufs [][]float32 // per-worker scratch, grown by scratch()

	// The pass: its tokens and positions (copied at Begin) and its scratch
	// tensors and views, handed out in call order and recycled at Begin.
	tokens, pos []int32
	arena       []*tensor
	used        int
	views       []*tensor
	viewsUsed   int

	launches uint64 // operations run, for backend.Counter

	// Repacked weights are copies (the file's stay mapped, for the rows a
	// repacked kernel does not read), so they are made only while they
	// total at most packBudget bytes (0: no limit): a model bigger than
	// half the machine's memory still loads, the rest of it unpacked.
	packed, packBudget int64

	// Reused by the operations, so that a pass allocates nothing.
	ropeCS []float32 // cos, sin of each rotary pair
	act    acts      // a matmul's converted input
	mm     mmJob     // the running matmul
	attn   attnJob   // the running attention
	swiglu swigluJob
	moe    moeBufs
	// per-worker results of the multi-row and multi-token kernels
	quads  [][4]float32
	tiles  [][16]float32
	tiles8 [][32]float32
}

var _ backend.Backend = (*CPU)(nil)

// New starts a CPU backend with one worker per core (threads ≤ 0) or threads workers.
func New(threads int) *CPU {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &CPU{
		pool: newPool(threads), packBudget: int64(sysmem.Physical() / 2),
		quads: make([][4]float32, threads), tiles: make([][16]float32, threads), tiles8: make([][32]float32, threads),
	}
}

// Name identifies the backend.
func (c *CPU) Name() string { return "cpu" }

// Threads is the number of workers.
func (c *CPU) Threads() int { return c.pool.n }

// Close stops the workers.
func (c *CPU) Close() error { c.pool.close(); return nil }

// tensor is a row-major float32 matrix; stride ≥ cols lets a view select columns.
type tensor struct {
	data       []float32
	rows, cols int
	stride     int
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

func (t *tensor) row(i int) []float32 { return t.data[i*t.stride : i*t.stride+t.cols] }

// Begin starts a pass: it keeps tokens and positions and recycles the
// previous pass's tensors and views.
func (c *CPU) Begin(tokens, pos []int32) {
	if len(tokens) != len(pos) {
		panic(fmt.Sprintf("cpu: begin: %d tokens, %d positions", len(tokens), len(pos)))
	}
	c.tokens = append(c.tokens[:0], tokens...)
	c.pos = append(c.pos[:0], pos...)
	c.used, c.viewsUsed = 0, 0
}

// Launches counts the operations run so far (backend.Counter).
func (c *CPU) Launches() uint64 { return c.launches }

// Tensor hands out the pass's next scratch buffer. A pass makes the same
// calls as the one before it, so after the first pass of a size every call
// finds its slot with storage already large enough.
func (c *CPU) Tensor(rows, cols int) backend.Tensor {
	if c.used == len(c.arena) {
		c.arena = append(c.arena, &tensor{})
	}
	t := c.arena[c.used]
	c.used++
	if cap(t.data) < rows*cols {
		t.data = make([]float32, rows*cols)
	}
	*t = tensor{data: t.data[:rows*cols], rows: rows, cols: cols, stride: cols}
	return t
}

// view hands out the pass's next view header.
func (c *CPU) view(data []float32, rows, cols, stride int) *tensor {
	if c.viewsUsed == len(c.views) {
		c.views = append(c.views, &tensor{})
	}
	v := c.views[c.viewsUsed]
	c.viewsUsed++
	*v = tensor{data: data, rows: rows, cols: cols, stride: stride}
	return v
}

// View is columns [col, col+cols) of t.
func (c *CPU) View(t backend.Tensor, col, cols int) backend.Tensor {
	p := t.(*tensor)
	if col < 0 || cols < 0 || col+cols > p.cols {
		panic(fmt.Sprintf("cpu: view [%d, %d) of %d columns", col, col+cols, p.cols))
	}
	end := (p.rows-1)*p.stride + col + cols
	if p.rows == 0 {
		end = col
	}
	return c.view(p.data[col:end], p.rows, cols, p.stride)
}

// RowsOf is rows [row, row+rows) of t.
func (c *CPU) RowsOf(t backend.Tensor, row, rows int) backend.Tensor {
	p := t.(*tensor)
	if row < 0 || rows < 0 || row+rows > p.rows {
		panic(fmt.Sprintf("cpu: rows [%d, %d) of %d", row, row+rows, p.rows))
	}
	if rows == 0 {
		return c.view(nil, 0, p.cols, p.stride)
	}
	return c.view(p.data[row*p.stride:(row+rows-1)*p.stride+p.cols], rows, p.cols, p.stride)
}

// Read copies t into dst.
func (c *CPU) Read(t backend.Tensor, dst []float32) {
	p := t.(*tensor)
	for i := 0; i < p.rows; i++ {
		copy(dst[i*p.cols:], p.row(i))
	}
}

// weight is a parameter in its file encoding. Vectors and F32 matrices are
// also available as float32 without a copy where the bytes allow it.
type weight struct {
	name     string
	typ      quant.Type
	dims     []uint64
	data     []byte
	rowBytes int       // bytes of one row of dims[0] values
	f32      []float32 // the values when typ is F32, or a decoded 1-D vector
	packed   []byte    // data repacked by its kernel's pack8, when it has one
}

func (w *weight) Name() string     { return w.name }
func (w *weight) Type() quant.Type { return w.typ }
func (w *weight) Dims() []uint64   { return w.dims }

func (w *weight) rows() int {
	n := 1
	for _, d := range w.dims[1:] {
		n *= int(d)
	}
	return n
}

// Weight adopts a tensor from the model file.
func (c *CPU) Weight(name string, typ quant.Type, dims []uint64, data []byte) (backend.Weight, error) {
	if typ != quant.F32 && !quant.CanDequantize(typ) {
		return nil, fmt.Errorf("%s: weight type %s is not supported by the cpu backend", name, typ)
	}
	rb, err := typ.RowBytes(int64(dims[0]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := &weight{name: name, typ: typ, dims: dims, data: data, rowBytes: int(rb)}
	n := int(dims[0]) * w.rows()
	if len(data) != n/typ.BlockSize()*typ.TypeSize() {
		return nil, fmt.Errorf("%s: %d bytes of data for %d %s weights", name, len(data), n, typ)
	}
	if k := kernels[typ]; k.pack8 != nil && len(dims) > 1 && w.rows()%8 == 0 &&
		(c.packBudget == 0 || c.packed+int64(len(data)) <= c.packBudget) {
		c.packed += int64(len(data))
		w.packed = make([]byte, len(data))
		g := 8 * w.rowBytes
		c.pool.run(len(data)/g, 1, &packJob{dst: w.packed, src: data, group: g, pack: k.pack8})
	}
	switch {
	case typ == quant.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 == 0:
		w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n)
	case typ == quant.F32 || len(dims) == 1:
		w.f32 = make([]float32, n)
		if err := quant.Dequantize(typ, data, w.f32); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return w, nil
}

// packJob runs a kernel's pack8 over groups of eight rows (group bytes each).
type packJob struct {
	dst, src []byte
	group    int
	pack     func(dst, src []byte, rowBytes int)
}

func (j *packJob) do(lo, hi, _ int) {
	j.pack(j.dst[lo*j.group:hi*j.group], j.src[lo*j.group:hi*j.group], j.group/8)
}

// cache holds the latent rows in float32: [layer][position][width].
type cache struct {
	data                     []float32
	layers, positions, width int
}

func (k *cache) Layers() int    { return k.layers }
func (k *cache) Positions() int { return k.positions }
func (k *cache) Width() int     { return k.width }

func (k *cache) row(layer, pos int) []float32 {
	o := (layer*k.positions + pos) * k.width
	return k.data[o : o+k.width]
}

// Cache allocates the whole latent cache up front.
func (c *CPU) Cache(layers, positions, width int) (backend.Cache, error) {
	n := int64(layers) * int64(positions) * int64(width)
	if layers <= 0 || positions <= 0 || width <= 0 || n > 1<<40 {
		return nil, fmt.Errorf("cpu: cannot allocate a cache of %d layers × %d positions × %d", layers, positions, width)
	}
	c.scratch(positions) // attention's scores, so decoding never grows them
	return &cache{data: make([]float32, n), layers: layers, positions: positions, width: width}, nil
}
