// Package cuda is the NVIDIA GPU backend. It drives the CUDA driver API and
// the NVRTC compiler through purego (no cgo), compiles its embedded kernels
// for the device and the model's shapes at load, keeps every weight and the
// whole latent cache in device memory, and records each forward pass as a
// list of kernel launches that runs when its result is read: a decode step
// (one token) is captured once as a CUDA graph and replayed every step,
// since the token, the position and the sequence length live in device
// memory that the kernels read.
package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

// Backend implements backend.Backend on one CUDA device.
type Backend struct {
	d      *driver
	dev    int32
	ctx    uintptr
	stream uintptr
	info   DeviceInfo

	work chan func()
	done chan struct{}

	kernels  *kernels
	compiled Compile
	// the units Prepare queued, by name (written only there, before any
	// other compile), and when
	ahead      map[string]*aheadUnit
	aheadStart time.Time
	aheadStop  atomic.Bool // Close: Prepare's workers start no more compiles
	// laterSlots bounds the units compiling in the background at once, to
	// half the cores, where no Prepare queued them: a dozen one-token
	// products the decode step does not launch start right after load,
	// beside the first prompt's work.
	laterSlots chan struct{}

	types       map[quant.Type]bool
	weights     []*weight
	weightBytes int64
	uploaded    Upload
	opened      float64   // seconds New took: the driver, NVRTC, the context
	pins        [2]pinned // the weights' pinned buffers (upload), until Cache
	pinNext     int
	kv          *kvCache
	ropes       map[*float32]uintptr

	arena arena

	// the pass being recorded
	T            int
	tokens       []int32
	pos          []int32
	maxPos       int
	tokDev       uintptr // int32 tokens then int32 positions, capacity tokCap each, then a draw's numbers
	tokCap       int
	staging      uintptr // pinned host memory
	stagingCap   int
	stagePending bool
	fromDevice   bool     // BeginNext: the token is the last answer, already in tokDev
	chained      bool     // tokDev's first token is the last ArgmaxAsync or DrawAsync answer
	one          [2]int32 // BeginNext's token and position
	slotPage     uintptr  // pinned words of the ArgmaxAsync and DrawAsync slots
	slots        []*slot
	freeSlots    []*slot
	unanswered   int // ArgmaxAsync and DrawAsync passes not waited for
	launches     []launch
	args         []uint64
	ptrs         []uintptr

	pending  []*pendingNorm
	pendRope []*pendingRope
	// a one-token kv_finish that the next attention may absorb, and one
	// that attention absorbed, leaving its kv row raw
	pendStore, rawKV *pendingStore
	stores           [2]pendingStore // what pendStore and rawKV point into (freeStore)
	kvl              int             // latent width (kv_lora) of the cache rows
	qcache           []quantEntry

	bigShared map[uintptr]int  // kernels whose dynamic shared memory limit was raised
	kernelIDs map[string]int32 // see kernelID
	fns       []uintptr        // by kernel id: its function, once resolved
	// unresolved: a launch of the pass recorded has no function yet (resolve)
	unresolved bool
	counters   uintptr     // zeroed per-token counters for last-block-done kernels, then mla_decode's grid barrier
	mla        *mlaBuffers // mla_decode's scratch (one allocation from qh), made at load where it serves
	// a batch's attention buffers, which every layer reuses (layerBuffer):
	// attn_partial's split states, the queries' latents, the merged latents
	states, query, olat chunk

	graphs   map[uint64]uintptr
	NoGraphs bool // launch every kernel directly (for tests and profiling)
	NoFusion bool // record every operation as its own kernels (for tests)
	// HalfCache keeps the latent cache in f16, as llama.cpp does by default
	// (half the bytes attention reads at long context); LATENT_CACHE_TYPE=f32
	// keeps float32, as the golden logits were made. Set before the model
	// is loaded.
	HalfCache bool
	// MLAFrom is the context length (positions up to the token's) from which
	// one-token attention runs as mla_decode, every cache row read once for
	// all heads, instead of attn_decode, a block per head and split; below
	// 0 (the default), the one mlaBuffers.from picks for the model's heads.
	MLAFrom   int
	nLaunch   uint64
	prof      *profiler
	pdl       bool         // launches use programmatic dependent launch (cuLaunchKernelEx)
	exConf    launchConfig // cuLaunchKernelEx's configuration and attributes, reused
	exAttrs   [2]launchAttr
	mmv1Names map[[4]int]string
	closed    bool
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Counter  = (*Backend)(nil)
	_ backend.Compiler = (*Backend)(nil)
	_ backend.Planner  = (*Backend)(nil)
	_ backend.Preparer = (*Backend)(nil)
)

// DeviceInfo describes the GPU.
type DeviceInfo struct {
	Name              string
	Major, Minor      int
	SMs               int
	TotalMem          int64
	Driver            int
	SharedPerBlockMax int
}

// Compile reports how the kernels were obtained at load.
type Compile struct {
	Seconds float64 // what the load spent on its modules once the weights were up: recording the step (Plan), waiting for the compiles (or the disk cache), loading the modules
	Modules int
	Cached  int     // modules read from the disk cache
	Ahead   int     // modules queued with the upload (Prepare): compiled there, or by the load where it came to one first
	Span    float64 // wall time of the compiles begun with the upload, from their start to the last of the modules' end (Seconds where Ahead is 0)
	Later   int     // modules the load did not wait for, compiled in the background (the one-token products the decode step does not launch, mla_decode's, an output-only type's eight-token products, a dense model's routing), not in Seconds
}

// New opens device 0 (or the device named by ordinal) and starts the
// goroutine that owns its context.
func New(ordinal int) (*Backend, error) {
	start := time.Now()
	d, err := loadDriver()
	if err != nil {
		return nil, err
	}
	if _, err := loadNVRTC(); err != nil {
		return nil, err
	}
	half, err := halfCache(os.Getenv("LATENT_CACHE_TYPE"))
	if err != nil {
		return nil, err
	}
	b := &Backend{d: d, work: make(chan func()), done: make(chan struct{}), types: map[quant.Type]bool{}, HalfCache: half, MLAFrom: -1,
		graphs: map[uint64]uintptr{}, ropes: map[*float32]uintptr{}, bigShared: map[uintptr]int{}, mmv1Names: map[[4]int]string{},
		kernelIDs: map[string]int32{}, laterSlots: make(chan struct{}, max(1, runtime.NumCPU()/2)),
		pdl: d.cuLaunchKernelEx != 0}
	started := make(chan error)
	go b.loop(ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	b.opened = time.Since(start).Seconds()
	return b, nil
}

// CheckEnv reports a LATENT_CACHE_TYPE this backend would refuse, so that
// a typo is an error even where no GPU is found and the CPU runs instead.
func CheckEnv() error {
	_, err := halfCache(os.Getenv("LATENT_CACHE_TYPE"))
	return err
}

// halfCache reads LATENT_CACHE_TYPE: f16 (the default) or f32.
func halfCache(v string) (bool, error) {
	switch v {
	case "", "f16":
		return true, nil
	case "f32":
		return false, nil
	}
	return false, fmt.Errorf("LATENT_CACHE_TYPE=%s: unknown cache type (f16 or f32)", v)
}

// loop is the goroutine that owns the CUDA context: a context is current
// on one OS thread, so every driver call runs here.
func (b *Backend) loop(ordinal int, started chan<- error) {
	runtime.LockOSThread()
	d := b.d
	err := func() error {
		var n int32
		if err := d.check("cuDeviceGetCount", call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
			return fmt.Errorf("%w: %v", ErrNoDevice, err)
		}
		if ordinal >= int(n) {
			return fmt.Errorf("%w: device %d asked for, the driver sees %d", ErrNoDevice, ordinal, n)
		}
		if err := d.check("cuDeviceGet", call(d.cuDeviceGet, uintptr(unsafe.Pointer(&b.dev)), uintptr(ordinal))); err != nil {
			return err
		}
		name := make([]byte, 256)
		call(d.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(b.dev))
		b.info.Name = strings.TrimRight(string(name), "\x00")
		attr := func(a int) int {
			var v int32
			call(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(b.dev))
			return int(v)
		}
		b.info.Major, b.info.Minor = attr(attrCCMajor), attr(attrCCMinor)
		b.info.SMs = attr(attrMultiprocessors)
		b.info.SharedPerBlockMax = attr(attrSharedOptin)
		var total uintptr
		call(d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(b.dev))
		b.info.TotalMem = int64(total)
		var ver int32
		call(d.cuDriverGetVersion, uintptr(unsafe.Pointer(&ver)))
		b.info.Driver = int(ver)
		if err := d.check("cuDevicePrimaryCtxRetain", call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&b.ctx)), uintptr(b.dev))); err != nil {
			return err
		}
		if err := d.check("cuCtxSetCurrent", call(d.cuCtxSetCurrent, b.ctx)); err != nil {
			return err
		}
		return d.check("cuStreamCreate", call(d.cuStreamCreate, uintptr(unsafe.Pointer(&b.stream)), 1))
	}()
	started <- err
	if err != nil {
		return
	}
	for f := range b.work {
		f()
		b.done <- struct{}{}
	}
}

// run executes f on the context's thread and waits for it.
func (b *Backend) run(f func()) {
	b.work <- f
	<-b.done
}

// Name identifies the backend.
func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU.
func (b *Backend) Device() DeviceInfo { return b.info }

// Compiled says how long the kernels took to compile or load at load time.
func (b *Backend) Compiled() Compile { return b.compiled }

// Upload is where a load's weights spent their time: on the host (checks,
// float32 vectors, repacking: hostWeight and its fill) and on the copies to
// the device where the host's work did not hide them (allocation, waits
// for a pinned buffer, the calls; the last copy's tail, waited for at
// Cache, not counted).
type Upload struct {
	Host, Copy float64 // seconds
	Bytes      int64   // on the device
}

// Uploaded says where the weights' upload spent its time.
func (b *Backend) Uploaded() Upload { return b.uploaded }

// Opened is the seconds New took: loading the driver and NVRTC, and the
// device's context (before any kernel could start compiling).
func (b *Backend) Opened() float64 { return b.opened }

// Launches counts the kernels run since the backend started (graph nodes
// included), for kernels per token.
func (b *Backend) Launches() uint64 { return b.nLaunch }

// Close frees everything on the device and stops the context's goroutine.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.aheadStop.Store(true)
	b.run(func() {
		d := b.d
		b.dropPins() // a load that failed before Cache
		call(d.cuStreamSynchronize, b.stream)
		for _, g := range b.graphs {
			call(d.cuGraphExecDestroy, g)
		}
		for _, w := range b.weights {
			call(d.cuMemFree, w.ptr)
		}
		if b.kv != nil {
			call(d.cuMemFree, b.kv.ptr)
		}
		for _, p := range b.ropes {
			call(d.cuMemFree, p)
		}
		for _, c := range b.arena.chunks {
			call(d.cuMemFree, c.ptr)
		}
		for _, c := range []chunk{b.states, b.query, b.olat} {
			if c.ptr != 0 {
				call(d.cuMemFree, c.ptr)
			}
		}
		if b.tokDev != 0 {
			call(d.cuMemFree, b.tokDev)
		}
		if b.counters != 0 {
			call(d.cuMemFree, b.counters)
		}
		if b.mla != nil {
			call(d.cuMemFree, b.mla.qh)
		}
		if b.staging != 0 {
			call(d.cuMemFreeHost, b.staging)
		}
		b.freeSlotPage()
		if b.kernels != nil {
			for _, m := range b.kernels.modules {
				call(d.cuModuleUnload, m)
			}
		}
		call(d.cuDevicePrimaryCtxRelease, uintptr(b.dev))
	})
	close(b.work)
	return nil
}

// alloc takes n bytes of device memory; must run on the context's thread.
// Out of memory, its error is a backend.OutOfMemory.
func (b *Backend) alloc(n int64, what string) (uintptr, error) {
	var p uintptr
	r := call(b.d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(max(n, 256)))
	if r == errOutOfMemory {
		var free, total uintptr
		call(b.d.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
		return 0, backend.OutOfMemory{Err: fmt.Errorf("out of GPU memory allocating %s: need %s, %s free of %s on %s (weights so far %s; use a smaller --ctx, a smaller quantization, or --backend cpu)",
			what, gib(n), gib(int64(free)), gib(int64(total)), b.info.Name, gib(b.weightBytes))}
	}
	if err := b.d.check("cuMemAlloc "+what, r); err != nil {
		return 0, err
	}
	return p, nil
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

// weight is a parameter in device memory, in its file encoding. Vectors
// (norm weights, biases) are kept as float32.
type weight struct {
	name     string
	typ      quant.Type
	dims     []uint64
	ptr      uintptr
	rowBytes int64
	rows     int64
}

func (w *weight) Name() string     { return w.name }
func (w *weight) Type() quant.Type { return w.typ }
func (w *weight) Dims() []uint64   { return w.dims }

func (w *weight) dim(i int) int {
	if i < len(w.dims) {
		return int(w.dims[i])
	}
	return 1
}

// deviceTypes are the weight encodings the kernels decode (every type the
// CPU backend reads).
var deviceTypes = map[quant.Type]string{
	quant.F32: "T_F32", quant.F16: "T_F16", quant.BF16: "T_BF16", quant.Q4_0: "T_Q4_0", quant.Q4_1: "T_Q4_1",
	quant.Q5_0: "T_Q5_0", quant.Q5_1: "T_Q5_1", quant.Q8_0: "T_Q8_0", quant.Q2_K: "T_Q2_K", quant.Q3_K: "T_Q3_K",
	quant.Q4_K: "T_Q4_K", quant.Q5_K: "T_Q5_K", quant.Q6_K: "T_Q6_K", quant.IQ4_NL: "T_IQ4_NL",
	quant.IQ4_XS: "T_IQ4_XS", quant.MXFP4: "T_MXFP4",
}

// Weight uploads a parameter to the device.
func (b *Backend) Weight(name string, typ quant.Type, dims []uint64, data []byte) (backend.Weight, error) {
	return b.StackedWeight(name, typ, dims, data)
}

// StackedWeight uploads a weight made of parts, each whole rows
// (backend.Stacker): every part goes to its rows' place on the device,
// repacked on its own where the type needs it, so no joined copy of the
// parts is made on the host.
func (b *Backend) StackedWeight(name string, typ quant.Type, dims []uint64, parts ...[]byte) (backend.Weight, error) {
	start := time.Now()
	w, h, err := hostWeight(name, typ, dims, parts)
	if err != nil {
		return nil, err
	}
	checked := time.Now()
	size := w.rows * w.rowBytes
	b.run(func() { w.ptr, err = b.alloc(size, "weight "+name) })
	if err == nil {
		err = b.upload(w.ptr, h)
	}
	// the host's part: the checks and the bytes made (fill); the rest, what
	// of the copies the making did not hide
	b.uploaded.Host += checked.Sub(start).Seconds() + h.host
	b.uploaded.Copy += time.Since(checked).Seconds() - h.host
	if err != nil {
		if w.ptr != 0 {
			b.run(func() {
				call(b.d.cuStreamSynchronize, b.stream) // no copy into it still runs
				call(b.d.cuMemFree, w.ptr)
			})
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b.types[w.typ] = true
	b.weights = append(b.weights, w)
	b.weightBytes += size
	b.uploaded.Bytes += size
	return w, nil
}

// hostBytes are a weight's bytes as the device keeps them, rows of
// rowBytes, made on the host a range of rows at a time (fill), straight
// into the buffer they are copied from; host sums the seconds fill took.
type hostBytes struct {
	rows, rowBytes int64
	fill           func(dst []byte, r0, n int64) // rows [r0, r0+n) into dst[:n·rowBytes]
	host           float64
}

// hostWeight checks a weight's parts against its type and dims and says
// what the device keeps of them: its weight (no storage yet) and how to
// make its bytes, a vector as float32 (storedType), a Q4_0, Q8_0 or Q6_K
// matrix repacked (repackInto), the rest as they are.
func hostWeight(name string, typ quant.Type, dims []uint64, parts [][]byte) (*weight, *hostBytes, error) {
	if _, ok := deviceTypes[typ]; !ok {
		return nil, nil, fmt.Errorf("%s: weight type %s is not supported by the cuda backend", name, typ)
	}
	if len(dims) == 0 {
		return nil, nil, fmt.Errorf("%s: a weight needs at least one dimension", name)
	}
	rb, err := typ.RowBytes(int64(dims[0]))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if rb == 0 {
		return nil, nil, fmt.Errorf("%s: rows of %d values", name, dims[0])
	}
	w := &weight{name: name, typ: typ, dims: append([]uint64(nil), dims...), rowBytes: rb, rows: 1}
	for _, d := range dims[1:] {
		w.rows *= int64(d)
	}
	total := 0
	for i, part := range parts {
		if int64(len(part))%rb != 0 {
			return nil, nil, fmt.Errorf("%s: part %d is %d bytes, not whole rows of %d", name, i, len(part), rb)
		}
		total += len(part)
	}
	if int64(total) != w.rows*rb {
		return nil, nil, fmt.Errorf("%s: %d bytes of data for %d rows of %d bytes", name, total, w.rows, rb)
	}
	if len(dims) == 1 && typ != quant.F32 {
		// vectors are read as float32 by the kernels
		v := make([]float32, dims[0])
		data := parts[0]
		if len(parts) > 1 {
			data = slices.Concat(parts...)
		}
		if err := quant.Dequantize(typ, data, v); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		w.typ, w.rowBytes, rb = quant.F32, int64(4*len(v)), int64(4*len(v))
		parts = [][]byte{unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))}
	}
	// each row from its part: copied as it is, or repacked
	put := func(dst, src []byte, n int64) { copyRanges(dst, src) }
	if (typ == quant.Q4_0 || typ == quant.Q8_0 || typ == quant.Q6_K) && len(dims) > 1 {
		K := int64(dims[0])
		w.rowBytes = repackedRow(typ, K)
		put = func(dst, src []byte, n int64) { repackInto(typ, dst, src, n, K) }
	}
	h := &hostBytes{rows: w.rows, rowBytes: w.rowBytes}
	h.fill = func(dst []byte, r0, n int64) {
		start := time.Now()
		defer func() { h.host += time.Since(start).Seconds() }()
		at := int64(0) // the first row of part
		for _, part := range parts {
			pr := int64(len(part)) / rb
			lo, hi := max(r0, at), min(r0+n, at+pr)
			if lo < hi {
				put(dst[(lo-r0)*w.rowBytes:(hi-r0)*w.rowBytes], part[(lo-at)*rb:(hi-at)*rb], hi-lo)
			}
			at += pr
		}
	}
	return w, h, nil
}

// copyRanges copies src into dst, in 4 MB pieces side by side.
func copyRanges(dst, src []byte) {
	inRanges(int64(len(src)), 4<<20, func(lo, hi int64) { copy(dst[lo:hi], src[lo:hi]) })
}

// inRanges runs f over [0, n) in ranges of per, side by side (at most one
// a core), or at once where there is one range: enough work a range to
// outweigh a goroutine is the caller's choice of per.
func inRanges(n, per int64, f func(lo, hi int64)) {
	if n <= per {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := int64(0); lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			f(lo, hi)
			<-slots
		}()
	}
	wg.Wait()
}

// errNoPinned says the upload's pinned buffers could not be had: it goes
// on through host memory, as a copy from pageable memory.
var errNoPinned = errors.New("no pinned memory for the upload")

// pinChunk is the size of each of the two pinned buffers a load's weights
// go through (upload).
const pinChunk = 64 << 20

// pinned is one of upload's pinned host buffers, and the event its last
// copy recorded.
type pinned struct {
	ptr  uintptr
	size int64
	ev   uintptr
	busy bool // a copy from it may still run
}

// upload copies a weight's device bytes to dst through two pinned buffers
// in turn: the host makes one range of rows in one buffer (repacking
// straight into it) while the copy from the other runs, and a copy from
// pinned memory goes at the link's speed, where one from pageable memory
// goes through the driver's own staging, synchronously. The copies run on
// the stream, before any kernel; Cache waits for the last.
func (b *Backend) upload(dst uintptr, h *hostBytes) error {
	per := max(1, pinChunk/h.rowBytes)
	need := min(per, h.rows) * h.rowBytes
	var pageable []byte // where no pinned memory could be had: made there, copied synchronously
	for r0 := int64(0); r0 < h.rows; r0 += per {
		n := min(per, h.rows-r0)
		at, size := dst+uintptr(r0*h.rowBytes), uintptr(n*h.rowBytes)
		var err error
		if pageable == nil {
			p := &b.pins[b.pinNext]
			b.pinNext ^= 1
			b.run(func() { err = b.readyPin(p, need) })
			switch {
			case err == nil:
				h.fill(unsafe.Slice((*byte)(hostPtr(p.ptr)), size), r0, n)
				b.run(func() {
					if err = b.d.check("upload", call(b.d.cuMemcpyHtoDAsync, at, p.ptr, size, b.stream)); err == nil {
						err = b.d.check("cuEventRecord", call(b.d.cuEventRecord, p.ev, b.stream))
					}
				})
				if err != nil {
					return err
				}
				p.busy = true
				continue
			case !errors.Is(err, errNoPinned):
				return err
			}
			pageable = make([]byte, need)
		}
		h.fill(pageable[:size], r0, n)
		b.run(func() {
			err = b.d.check("upload", call(b.d.cuMemcpyHtoD, at, uintptr(unsafe.Pointer(&pageable[0])), size))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readyPin makes p a pinned buffer of at least need bytes whose last copy
// has finished (context thread).
func (b *Backend) readyPin(p *pinned, need int64) error {
	d := b.d
	if p.busy {
		if err := d.check("upload", call(d.cuEventSynchronize, p.ev)); err != nil {
			return err
		}
		p.busy = false
	}
	if p.ev == 0 {
		if err := d.check("cuEventCreate", call(d.cuEventCreate, uintptr(unsafe.Pointer(&p.ev)), 2)); err != nil { // CU_EVENT_DISABLE_TIMING
			return err
		}
	}
	if p.size < need {
		if p.ptr != 0 {
			call(d.cuMemFreeHost, p.ptr)
			p.ptr, p.size = 0, 0
		}
		size := max(need, pinChunk)
		if err := d.check("cuMemAllocHost", call(d.cuMemAllocHost, uintptr(unsafe.Pointer(&p.ptr)), uintptr(size))); err != nil {
			p.ptr = 0
			return fmt.Errorf("%w: %v", errNoPinned, err)
		}
		p.size = size
	}
	return nil
}

// dropPins waits for the weights' last copies and frees the pinned
// buffers (context thread): a copy that failed is reported here. The
// copies from pinned memory ran on b.stream; those from pageable memory
// (where no pinned memory could be had) on the legacy stream, which may
// return before their DMA lands and which b.stream's kernels do not wait
// for.
func (b *Backend) dropPins() error {
	d := b.d
	err := d.check("upload the weights", call(d.cuStreamSynchronize, b.stream))
	if err == nil {
		err = d.check("upload the weights", call(d.cuStreamSynchronize, 0))
	}
	for i := range b.pins {
		p := &b.pins[i]
		if p.ptr != 0 {
			call(d.cuMemFreeHost, p.ptr)
		}
		if p.ev != 0 {
			call(d.cuEventDestroy, p.ev)
		}
		*p = pinned{}
	}
	return err
}

// kvCache is the latent cache: [layer][position][width], float32 or f16.
type kvCache struct {
	ptr                      uintptr
	layers, positions, width int
	esize                    int64
}

func (k *kvCache) Layers() int    { return k.layers }
func (k *kvCache) Positions() int { return k.positions }
func (k *kvCache) Width() int     { return k.width }

func (k *kvCache) layer(l int) uintptr {
	return k.ptr + uintptr(int64(l)*int64(k.positions)*int64(k.width)*k.esize)
}

// Cache allocates the latent cache for the whole context. The kernels,
// specialised for the model's shapes (all weights are known by now),
// compile next: at Plan, or before the first pass runs.
func (b *Backend) Cache(layers, positions, width int) (backend.Cache, error) {
	var perr error // every weight is handed over by now, whatever Cache returns
	b.run(func() { perr = b.dropPins() })
	if perr != nil {
		return nil, perr
	}
	if layers <= 0 || positions <= 0 || width <= 0 {
		return nil, fmt.Errorf("cuda: cannot allocate a cache of %d layers × %d positions × %d", layers, positions, width)
	}
	if b.kv != nil {
		return nil, fmt.Errorf("cuda: the cache is already allocated")
	}
	k := &kvCache{layers: layers, positions: positions, width: width, esize: cacheElement(b.HalfCache)}
	n := int64(layers) * int64(positions) * int64(width) * k.esize
	var err error
	b.run(func() {
		if k.ptr, err = b.alloc(n, fmt.Sprintf("the latent cache (%d layers × %d positions × %d values)", layers, positions, width)); err != nil {
			return
		}
		if err = b.d.check("cuMemsetD8", call(b.d.cuMemsetD8, k.ptr, 0, uintptr(n))); err != nil {
			return
		}
		if b.counters, err = b.alloc(countersBytes, "counters"); err != nil {
			return
		}
		err = b.d.check("cuMemsetD8", call(b.d.cuMemsetD8, b.counters, 0, countersBytes))
	})
	if err != nil {
		return nil, err
	}
	b.kv = k
	b.kvl = b.latentWidth()
	if err := b.allocMLA(); err != nil {
		return nil, err
	}
	return k, nil
}

// tensor is a float32 matrix in device memory; stride ≥ cols selects columns.
type tensor struct {
	ptr                uintptr
	rows, cols, stride int
}

func (t *tensor) Rows() int { return t.rows }
func (t *tensor) Cols() int { return t.cols }

func tens(t backend.Tensor) *tensor { return t.(*tensor) }
func wt(w backend.Weight) *weight   { return w.(*weight) }

func (t *tensor) row(i int) uintptr { return t.ptr + uintptr(4*i*t.stride) }

// arena is the pass's scratch: chunks of device memory handed out in order
// and recycled at each Begin, so the same sequence of requests gets the same
// addresses (what lets one recorded graph serve every decode step).
type arena struct {
	chunks []chunk
	cur    int
	off    int64
}

type chunk struct {
	ptr  uintptr
	size int64
}

const chunkSize = 256 << 20

// maxCounters bounds the tokens of a pass that a last-block-done kernel
// (moe_router) serves in one launch, and the (token, head) pairs of an
// attn_partial that merges its splits itself.
const maxCounters = 1 << 16

// The counters' allocation: maxCounters words, then mla_decode's grid
// barrier (arrivals, exits) at barrierOffset and its heads' barriers
// (arrivals, a word each).
const (
	barrierOffset = 4 * maxCounters
	countersBytes = barrierOffset + 4*(2+mlaMaxHeads)
)

// scratch returns n bytes of pass scratch, 256-byte aligned.
func (b *Backend) scratch(n int64) uintptr {
	n = (n + 255) &^ 255
	a := &b.arena
	for {
		if a.cur < len(a.chunks) && a.off+n <= a.chunks[a.cur].size {
			p := a.chunks[a.cur].ptr + uintptr(a.off)
			a.off += n
			return p
		}
		if a.cur < len(a.chunks) && a.off > 0 {
			a.cur, a.off = a.cur+1, 0
			continue
		}
		if a.cur < len(a.chunks) && a.chunks[a.cur].size >= n {
			continue
		}
		// a new chunk here, before any smaller one
		size := max(int64(chunkSize), n)
		var p uintptr
		var err error
		b.run(func() { p, err = b.alloc(size, "activations") })
		if err != nil {
			b.allocFailed(err)
		}
		a.chunks = append(a.chunks, chunk{})
		copy(a.chunks[a.cur+1:], a.chunks[a.cur:])
		a.chunks[a.cur] = chunk{ptr: p, size: size}
		a.off = 0
	}
}

// allocFailed ends a pass whose allocation failed. Out of memory, it drops
// the pass being recorded (nothing will read what its launches would
// compute) and raises backend.OutOfMemory, which the model's pass returns
// as its error; any other failure (a broken context) is a plain panic.
func (b *Backend) allocFailed(err error) {
	var oom backend.OutOfMemory
	if !errors.As(err, &oom) {
		panic(fmt.Errorf("cuda: %w", err))
	}
	b.launches, b.args = b.launches[:0], b.args[:0]
	b.stagePending = false
	b.resetPass()
	panic(backend.OutOfMemory{Err: fmt.Errorf("cuda: %w", oom.Err)})
}

// Tensor is a rows × cols buffer of the pass's scratch.
func (b *Backend) Tensor(rows, cols int) backend.Tensor {
	return &tensor{ptr: b.scratch(int64(rows) * int64(cols) * 4), rows: rows, cols: cols, stride: cols}
}

// View is columns [col, col+cols) of t.
func (b *Backend) View(t backend.Tensor, col, cols int) backend.Tensor {
	p := tens(t)
	if col < 0 || cols < 0 || col+cols > p.cols {
		panic(fmt.Sprintf("cuda: view [%d, %d) of %d columns", col, col+cols, p.cols))
	}
	return &tensor{ptr: p.ptr + uintptr(4*col), rows: p.rows, cols: cols, stride: p.stride}
}

// RowsOf is rows [row, row+rows) of t.
func (b *Backend) RowsOf(t backend.Tensor, row, rows int) backend.Tensor {
	p := tens(t)
	if row < 0 || rows < 0 || row+rows > p.rows {
		panic(fmt.Sprintf("cuda: rows [%d, %d) of %d", row, row+rows, p.rows))
	}
	return &tensor{ptr: p.row(row), rows: rows, cols: p.cols, stride: p.stride}
}

// Begin starts a pass: the previous pass's work is finished, its scratch
// recycled, and tokens and positions staged for the device.
func (b *Backend) Begin(tokens, pos []int32) {
	if len(b.launches) > 0 {
		b.flushPass()
	}
	if len(tokens) != len(pos) {
		panic(fmt.Sprintf("cuda: begin: %d tokens, %d positions", len(tokens), len(pos)))
	}
	b.arena.cur, b.arena.off = 0, 0
	b.resetPass()
	b.T = len(tokens)
	b.tokens = append(b.tokens[:0], tokens...)
	b.pos = append(b.pos[:0], pos...)
	b.maxPos = 0
	b.fromDevice = false
	for _, p := range pos {
		b.maxPos = max(b.maxPos, int(p))
	}
	if b.kv != nil && b.maxPos >= b.kv.positions {
		panic(fmt.Sprintf("cuda: position %d is past the cache of %d", b.maxPos, b.kv.positions))
	}
	if b.T > b.tokCap {
		b.chained = false
		old, n := b.tokDev, max(b.T, 64)
		b.tokCap, b.tokDev = 0, 0
		b.tokDev = b.regrow(old, int64(8*n)+int64(unsafe.Sizeof(drawArgs{})), "token ids")
		b.tokCap = n
	}
	b.stagePending = true
}

func (b *Backend) tokensDev() uintptr { return b.tokDev }
func (b *Backend) posDev() uintptr    { return b.tokDev + uintptr(4*b.tokCap) }

// drawDev is where a draw's numbers (drawArgs) go, after the positions.
func (b *Backend) drawDev() uintptr { return b.tokDev + uintptr(8*b.tokCap) }

// Read copies t to host memory, running the pass's pending work first.
func (b *Backend) Read(t backend.Tensor, dst []float32) {
	p := tens(t)
	n := int64(p.rows) * int64(p.cols)
	if int64(len(dst)) < n {
		panic(fmt.Sprintf("cuda: read of %d values into %d", n, len(dst)))
	}
	if n == 0 {
		return
	}
	b.reads(p) // lazy work writing t runs first
	span := (int64(p.rows-1)*int64(p.stride) + int64(p.cols)) * 4
	if err := b.readBack(p.ptr, span); err != nil {
		panic(fmt.Errorf("cuda: read: %w", err))
	}
	src := unsafe.Slice((*float32)(hostPtr(b.staging)), span/4)
	for r := 0; r < p.rows; r++ {
		copy(dst[r*p.cols:(r+1)*p.cols], src[r*p.stride:r*p.stride+p.cols])
	}
}

// readBack runs the pass's pending work and copies n bytes at src to the
// start of the pinned staging buffer.
func (b *Backend) readBack(src uintptr, n int64) error {
	b.resolve()
	var err error
	b.run(func() {
		b.flush()
		if err = b.ensureStaging(n); err != nil {
			return
		}
		d := b.d
		if err = d.check("cuMemcpyDtoHAsync", call(d.cuMemcpyDtoHAsync, b.staging, src, uintptr(n), b.stream)); err != nil {
			return
		}
		err = d.check("cuStreamSynchronize", call(d.cuStreamSynchronize, b.stream))
	})
	return err
}

// ensureStaging grows the pinned host buffer to n bytes (context thread).
func (b *Backend) ensureStaging(n int64) error {
	if n <= int64(b.stagingCap) {
		return nil
	}
	if b.staging != 0 {
		call(b.d.cuMemFreeHost, b.staging)
		b.staging = 0
	}
	size := max(n, 1<<20)
	if err := b.d.check("cuMemAllocHost", call(b.d.cuMemAllocHost, uintptr(unsafe.Pointer(&b.staging)), uintptr(size))); err != nil {
		b.stagingCap = 0
		return err
	}
	b.stagingCap = int(size)
	return nil
}

// ropeFreqs returns the device copy of r's frequencies, uploading them once.
func (b *Backend) ropeFreqs(r *backend.Rope) uintptr {
	key := &r.Freqs[0]
	if p, ok := b.ropes[key]; ok {
		return p
	}
	var p uintptr
	var err error
	b.run(func() {
		if p, err = b.alloc(int64(4*len(r.Freqs)), "rope frequencies"); err != nil {
			return
		}
		if err = b.d.check("upload rope", call(b.d.cuMemcpyHtoD, p, uintptr(unsafe.Pointer(&r.Freqs[0])), uintptr(4*len(r.Freqs)))); err == nil {
			err = b.d.check("upload rope", call(b.d.cuStreamSynchronize, 0)) // landed before b.stream's kernels read it (Cache)
		}
	})
	if err != nil {
		b.allocFailed(err)
	}
	b.ropes[key] = p
	return p
}

func f32bits(f float32) uint64 { return uint64(math.Float32bits(f)) }

// q6kSlot is the bytes a Q6_K block takes on the device: its 210 bytes
// (ql, qh, scales, d) padded to 16-byte alignment, so that the kernels read
// it with 16-byte loads instead of 2-byte ones (Q6K_SLOT in the kernels).
// Padding costs 7% more device memory for Q6_K matrices.
const q6kSlot = 224

// repackedRow is the bytes a row of K values of typ takes on the device
// (repackInto's layout).
func repackedRow(typ quant.Type, K int64) int64 {
	if typ == quant.Q6_K {
		return K / 256 * q6kSlot
	}
	_, raw := block32(typ)
	return (K/32*raw + 15) &^ 15
}

// block32 is a Q4_0 or Q8_0 block's (32 values) quant bytes and its bytes
// in the file (the quants after an f16 scale).
func block32(typ quant.Type) (quants, raw int64) {
	if typ == quant.Q8_0 {
		return 32, 34
	}
	return 16, 18
}

// repackInto lays data's rows of a Q4_0 or Q8_0 matrix out in dst for
// 16-byte loads: each row holds its blocks' quant bytes first, then their
// f16 scales, then zeros to a multiple of 16 bytes (repackedRow). A Q6_K
// matrix keeps its blocks in order, each zero-padded to q6kSlot bytes.
// The padding is written whatever dst held, so one buffer serves every
// weight. A large matrix is split into row ranges repacked side by side:
// go test -bench Repack ./backend/cuda, a 235 MB Q4_0 matrix freshly
// mapped, two cores: one goroutine 4.2-4.9 GB/s, ranges 5.2-6.9.
func repackInto(typ quant.Type, dst, data []byte, rows, K int64) {
	in, out := int64(len(data))/max(rows, 1), repackedRow(typ, K)
	per := max(1, (4<<20)/max(in, 1)) // rows of about 4 MB a range
	inRanges(rows, per, func(r0, r1 int64) { repackRows(typ, dst[r0*out:r1*out], data[r0*in:r1*in], r1-r0, K) })
}

// repackRows is repackInto on one goroutine.
func repackRows(typ quant.Type, dst, data []byte, rows, K int64) {
	if typ == quant.Q6_K {
		for i := int64(0); i < rows*(K/256); i++ {
			slot := dst[i*q6kSlot : (i+1)*q6kSlot]
			clear(slot[copy(slot, data[i*210:(i+1)*210]):])
		}
		return
	}
	nb, rb := K/32, repackedRow(typ, K)
	qb, raw := block32(typ)
	for r := int64(0); r < rows; r++ {
		src, row := data[r*nb*raw:(r+1)*nb*raw], dst[r*rb:(r+1)*rb]
		for b := int64(0); b < nb; b++ {
			copy(row[b*qb:(b+1)*qb], src[b*raw+2:(b+1)*raw])
			row[nb*qb+2*b], row[nb*qb+2*b+1] = src[b*raw], src[b*raw+1]
		}
		clear(row[nb*raw:])
	}
}
