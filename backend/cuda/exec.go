package cuda

import (
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/latent-ai/latent/backend"
	"github.com/latent-ai/latent/quant"
)

//go:embed kernels/*.cu kernels/*.cuh
var sources embed.FS

// kernels are the loaded modules and their functions by name.
type kernels struct {
	modules []uintptr          // in units' order
	unit    map[string]uintptr // by unit name
	fn      map[string]uintptr
	later   map[string]*laterUnit // units compiling in the background, by name, until loaded
}

// unit is one NVRTC program: a kernel file compiled with the model's
// defines and the unit's own, which pick the file's kernels it holds.
type unit struct {
	name, file, defs string
	batchOf          string // the device type whose eight-token products it holds (an mmvq8 unit), or ""
	moe              bool   // only mixture-of-experts layers launch its kernels (the routing)
	oneToken         bool   // it holds one one-token product kernel, its name's (an mmv1 variant, an mmvk1 walk)
}

// moduleHeaders are the headers a file needs besides common.cuh.
var moduleHeaders = map[string][]string{"mmvq.cu": {"dot.cuh"}, "attention.cu": {"dot.cuh"}}

// mmvqLists are mmvq.cu's lists of the kernels a unit holds, and what each
// is in a unit that holds none of them.
var mmvqLists = []struct{ macro, none string }{
	{"UNIT_QUANT_ACT", "0"}, {"UNIT_MMV1(K)", ""}, {"UNIT_MMVK1(X)", ""}, {"UNIT_MMVK1G(X)", ""}, {"UNIT_MMVQ8(X)", ""},
}

// units are the programs for a model with the given fast weight types
// (device names: T_Q4_0, ...) and attn_decode (where it serves). A cold
// start waits for the slowest unit, and compiling them side by side slows
// each, so the costly kernels are units of their own (each type's mmvq8
// products, attn_decode, the MoE routing) and so is every one-token product
// kernel (each mmv1 variant mqLaunch can pick for Q4_0 and Q8_0, mmvk1's
// one-matrix and gate/up walks for the K-quants): compile waits only for
// those the model's decode step launches (Plan), and for the others that
// every pass may need; the rest compile in the background.
func units(fast []string, decode bool) []unit {
	// mmvqUnit holds mmvq.cu's kernels of the list macro names.
	mmvqUnit := func(name, macro, list string) unit {
		defs := ""
		for _, l := range mmvqLists {
			v := l.none
			if l.macro == macro {
				v = list
			}
			defs += fmt.Sprintf("#define %s %s\n", l.macro, v)
		}
		return unit{name: name, file: "mmvq.cu", defs: defs}
	}
	us := []unit{
		{name: "basic", file: "basic.cu"},
		{name: "router", file: "router.cu", moe: true},
		{name: "matmul", file: "matmul.cu"},
		{name: "attention", file: "attention.cu"},
		mmvqUnit("quant_act", "UNIT_QUANT_ACT", "1"),
	}
	if decode {
		us = append(us, unit{name: "attn_decode", file: "attention.cu", defs: "#define UNIT_DECODE 1\n"})
	}
	for _, t := range fast {
		var one []unit
		if vs := mmv1Variants(t); vs != nil {
			for _, v := range vs {
				one = append(one, mmvqUnit(mmv1Kernel(v[0], v[1], v[2], t), "UNIT_MMV1(K)", fmt.Sprintf("K(%s, %d, %d, %d, _%s)", t, v[0], v[1], v[2], t)))
			}
		} else {
			one = append(one, mmvqUnit(mmvk1Kernel(t, false), "UNIT_MMVK1(X)", "X("+t+")"), mmvqUnit(mmvk1Kernel(t, true), "UNIT_MMVK1G(X)", "X("+t+")"))
		}
		for _, u := range one {
			u.oneToken = true
			us = append(us, u)
		}
		u := mmvqUnit("mmvq8_"+t, "UNIT_MMVQ8(X)", "X("+t+")")
		u.batchOf = t
		us = append(us, u)
	}
	return us
}

// waited reports whether a load waits for u's compile, given the one-token
// products' kernels the decode step launched (nil: no Plan, all of them),
// the types of the layers' matrices (batchTypes) and whether the model has
// mixture-of-experts layers (routes). It does not for a one-token product
// the step did not launch, an eight-token unit of a type only the output
// has (its batch product runs only for a request of every token's logits),
// or a dense model's routing.
func (u unit) waited(launched, batch map[string]bool, moe bool) bool {
	return !(u.oneToken && launched != nil && !launched[u.name] || u.batchOf != "" && !batch[u.batchOf] || u.moe && !moe)
}

// mlaUnit is mla_decode's unit for MT row tiles of 16 heads.
func mlaUnit(mt int) unit {
	return unit{name: fmt.Sprintf("mla%d", mt), file: "attention.cu", defs: fmt.Sprintf("#define UNIT_MLA %d\n", mt)}
}

// latentWidth is kv_lora: attn_k_b's middle dimension, or the cache row
// rounded down to 32 when the model has none.
func (b *Backend) latentWidth() int {
	for _, w := range b.weights {
		if strings.HasSuffix(w.name, "attn_k_b.weight") && len(w.dims) == 3 {
			if kvl := int(w.dims[1]); kvl%32 == 0 && kvl < b.kv.width {
				return kvl
			}
		}
	}
	return b.kv.width &^ 31
}

// shapeDefines specialises the kernels for this model: the cache row, the
// latent width, the cache's element type and the weight types present,
// those with integer-dot kernels (fast) and those without (slow), and the
// fast ones by name, for units.
func (b *Backend) shapeDefines() (defs string, fastNames []string) {
	var all, slow []string
	for t := range b.types {
		n := deviceTypes[t]
		all = append(all, n)
		if fastTypes[t] {
			fastNames = append(fastNames, n)
		} else {
			slow = append(slow, n)
		}
	}
	slices.Sort(all)
	slices.Sort(fastNames)
	slices.Sort(slow)
	list := func(names []string) string {
		var xs []string
		for _, n := range names {
			xs = append(xs, "X("+n+")")
		}
		return strings.Join(xs, " ")
	}
	half := 0
	if b.kv.esize == 2 {
		half = 1
	}
	maxK := 256
	for _, w := range b.weights {
		if fastTypes[w.typ] && len(w.dims) > 1 {
			maxK = max(maxK, (w.dim(0)+255)&^255)
		}
	}
	return fmt.Sprintf("#define CACHE_W %d\n#define KV_LORA %d\n#define CACHE_HALF %d\n#define MAX_K %d\n#define WEIGHT_TYPES(X) %s\n#define FAST_TYPES(X) %s\n#define SLOW_TYPES(X) %s\n",
		b.kv.width, b.kvl, half, maxK, list(all), list(fastNames), list(slow)) + fixedDefines, fastNames
}

// fixedDefines give the kernels the sizes the Go side uses: the draw
// kernels' (kernels/basic.cu) launch sizes, a Q6_K block's slot on the
// device (repack), the attention kernels' warps, mla_decode's tile and
// query copies, mmvk1's stride of a rounded input block in shared memory,
// moe_router8's cluster and experts a block, the blocks an SM holds of mmv1
// and of mmvk1, and the activation roundings.
var fixedDefines = fmt.Sprintf("#define DRAW_SLICE %d\n#define DRAW_MERGE %d\n#define DRAW_MAX_K %d\n#define Q6K_SLOT %d\n"+
	"#define ATT_WARPS %d\n#define MLA_TP %d\n#define MLA_PAD %d\n#define MLA_QREP %d\n#define MMVK1_QST %d\n#define ROUTER_CLUSTER %d\n#define ROUTER8_E %d\n#define MMV1_BLOCKS %d\n#define MMVK1_BLOCKS %d\n"+
	"#define ROUND_NONE %d\n#define ROUND_F16 %d\n#define ROUND_BF16 %d\n#define ROUND_Q8_0 %d\n#define ROUND_Q8_K %d\n",
	drawSlice, drawMerge, backend.MaxDrawTopK, q6kSlot, attWarps, mlaTile, mlaPad, mlaQCopies, mmvk1QuantStride, routerCluster, router8Experts,
	mmv1BlocksPerSM, mmvk1BlocksPerSM, roundNone, roundF16, roundBF16, roundQ8_0, roundQ8_K)

// Plan records the model's decode step (step: a one-token pass, which
// never runs) and compiles the kernels: the units of the one-token products
// that step launches, with those any pass may need, before it returns; the
// other one-token products' units afterwards, in the background, where a
// pass that launches one waits for it (backend.Planner). The recording is
// counted in Compiled's Seconds. Without a Plan, the first pass to run
// compiles every unit (resolve).
func (b *Backend) Plan(step func() error) error {
	if b.kv == nil {
		return fmt.Errorf("cuda: plan before the cache was allocated")
	}
	if b.kernels != nil {
		return fmt.Errorf("cuda: plan after the kernels were compiled")
	}
	start := time.Now()
	err := step()
	launched := map[string]bool{}
	for _, l := range b.launches {
		launched[l.name] = true
	}
	withRowGroups(launched)
	b.discard()
	if err != nil {
		return fmt.Errorf("plan a decode step: %w", err)
	}
	if b.kernels != nil { // a lookup while recording (mla_decode's fit, MLAFrom 0) compiled every unit
		return nil
	}
	return b.compile(launched, start)
}

// withRowGroups adds to the kernels a step launched every mmv1 variant that
// differs from one of them only in G, the rows that share the input's
// reads: mqLaunch picks G by how many rows a launch has, and a prompt's
// routed experts of one token each are one launch of many matrices where
// the step's are a few (deepseek's and glm's prompts launch
// mmv1_4_2_0_T_Q4_0, their decode steps 1_2_0 and 2_2_0), so without them
// the first prompt would wait for a unit compiling in the background.
func withRowGroups(launched map[string]bool) {
	for _, t := range deviceTypes {
		vs := mmv1Variants(t)
		for _, v := range vs {
			if !launched[mmv1Kernel(v[0], v[1], v[2], t)] {
				continue
			}
			for _, w := range vs {
				if w[1] == v[1] && w[2] == v[2] {
					launched[mmv1Kernel(w[0], w[1], w[2], t)] = true
				}
			}
		}
	}
}

// discard drops the recorded pass without running it.
func (b *Backend) discard() {
	b.launches, b.args = b.launches[:0], b.args[:0]
	b.resetPass()
	b.stagePending, b.unresolved = false, false
}

// compile builds (or reads from the disk cache) the units a load waits for
// (waited) in parallel and loads them on the device; mla_decode's unit,
// where allocMLA made its scratch (no step needs it before MLAFrom
// positions), and the others compile afterwards in the background.
// Compiled's Seconds counts from start; its Span, where units came from
// Prepare's compiles, from theirs.
func (b *Backend) compile(launched map[string]bool, start time.Time) error {
	arch, devKey := b.target()
	defs, us, later := b.unitPlan(launched)
	bins, hits, err := b.compileModules(defs, us, arch, devKey)
	if err != nil {
		return err
	}
	k := &kernels{unit: map[string]uintptr{}, fn: map[string]uintptr{}, later: map[string]*laterUnit{}}
	for i, bin := range bins {
		if err := b.loadModule(k, us[i].name, bin); err != nil {
			b.run(func() {
				for _, m := range k.modules { // Close unloads only b.kernels' modules
					call(b.d.cuModuleUnload, m)
				}
			})
			return err
		}
	}
	b.kernels = k
	b.compiled = Compile{Seconds: time.Since(start).Seconds(), Modules: len(bins)}
	for _, h := range hits {
		if h {
			b.compiled.Cached++
		}
	}
	for _, u := range us {
		if a := b.aheadOf(defs, u); a != nil {
			b.compiled.Ahead++
			b.compiled.Span = max(b.compiled.Span, a.end.Sub(b.aheadStart).Seconds())
		}
	}
	if b.compiled.Ahead == 0 {
		b.compiled.Span = b.compiled.Seconds
	}
	if b.mla != nil {
		b.compileLater(mlaUnit(b.mla.tiles()), defs, arch, devKey)
	}
	for _, u := range later {
		b.compileLater(u, defs, arch, devKey)
	}
	return nil
}

// target is what the kernels compile for: the device's architecture, and
// the device and driver as the disk cache's key names them.
func (b *Backend) target() (arch, devKey string) {
	return fmt.Sprintf("sm_%d%d", b.info.Major, b.info.Minor), fmt.Sprintf("%s cc%d.%d driver %d", b.info.Name, b.info.Major, b.info.Minor, b.info.Driver)
}

// unitPlan is the model's defines and its units: those a load waits for,
// given the one-token products' kernels the decode step launched (nil:
// all of them), and those that compile afterwards in the background
// (mla_decode's is compile's to add).
func (b *Backend) unitPlan(launched map[string]bool) (defs string, waited, later []unit) {
	defs, fast := b.shapeDefines()
	// attn_decode's unit only where some layer's k_b and v_b have its kernels
	H, _ := b.decodeHeads()
	batch, moe := b.batchTypes(), b.routes()
	for _, u := range units(fast, b.attnDecodes() && H > 0) {
		if u.waited(launched, batch, moe) {
			waited = append(waited, u)
		} else {
			later = append(later, u)
		}
	}
	return defs, waited, later
}

// batchTypes are the device types of the matrices a batch's products read:
// every matrix but the output's (and the token embeddings', which an output
// tied to them is), whose batch product runs only for a request of every
// token's logits. A fast type of those alone (a Q6_K output beside Q4_0
// layers) compiles its eight-token unit in the background (compile).
func (b *Backend) batchTypes() map[string]bool {
	types := map[string]bool{}
	for _, w := range b.weights {
		if len(w.dims) > 1 && w.name != "output.weight" && w.name != "token_embd.weight" {
			types[deviceTypes[w.typ]] = true
		}
	}
	return types
}

// routes reports whether the model has mixture-of-experts layers (a
// router, ffn_gate_inp): a dense model's load does not wait for the
// routing kernels' unit, which then compiles in the background.
func (b *Backend) routes() bool {
	for _, w := range b.weights {
		if strings.HasSuffix(w.name, "ffn_gate_inp.weight") {
			return true
		}
	}
	return false
}

// compileLater starts compiling unit u in the background (or waits for
// Prepare's compile of it); lookup waits for it and loads it.
func (b *Backend) compileLater(u unit, defs, arch, devKey string) {
	l := &laterUnit{done: make(chan struct{})}
	b.kernels.later[u.name] = l
	b.compiled.Later++
	go func() {
		defer close(l.done)
		if a := b.aheadOf(defs, u); a != nil { // a worker of Prepare's compiles it
			<-a.done
			l.bin, l.err = a.bin, a.err
			return
		}
		b.laterSlots <- struct{}{}
		defer func() { <-b.laterSlots }()
		bins, _, err := b.compileModules(defs, []unit{u}, arch, devKey)
		if l.err = err; err == nil {
			l.bin = bins[0]
		}
	}()
}

// WaitCompiles waits for the units compiling in the background (compileLater),
// so that a benchmark's first steps do not wait for one.
func (b *Backend) WaitCompiles() {
	if b.kernels == nil {
		return
	}
	for _, l := range b.kernels.later {
		<-l.done
	}
}

// laterUnit is a unit compiling in the background: bin once done is closed.
type laterUnit struct {
	done chan struct{}
	bin  []byte
	err  error
}

// compileModules compiles every unit for arch with the model's defines, in
// parallel, through the disk cache; a unit whose compile Prepare started
// (the same source) is taken from there.
func (b *Backend) compileModules(defs string, us []unit, arch, devKey string) (bins [][]byte, hits []bool, err error) {
	bins = make([][]byte, len(us))
	hits = make([]bool, len(us))
	errs := make([]error, len(us))
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(1, runtime.NumCPU())) // at most a compile per core
	for i, u := range us {
		if a := b.aheadOf(defs, u); a != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.compile(arch, devKey, slots) // where no worker came to it yet
				<-a.done
				bins[i], hits[i], errs[i] = a.bin, a.hit, a.err
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			bins[i], hits[i], errs[i] = compileUnit(defs, u, arch, devKey)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return bins, hits, nil
}

// unitSource is unit u's program: the model's defines, the unit's own, the
// headers and its file.
func unitSource(defs string, u unit) (string, error) {
	src := defs + u.defs
	for _, f := range append([]string{"common.cuh"}, moduleHeaders[u.file]...) {
		text, err := sources.ReadFile("kernels/" + f)
		if err != nil {
			return "", err
		}
		src += string(text) + "\n"
	}
	body, err := sources.ReadFile("kernels/" + u.file)
	if err != nil {
		return "", err
	}
	return src + string(body), nil
}

// compileUnit compiles unit u for arch, or reads it from the disk cache
// (hit).
func compileUnit(defs string, u unit, arch, devKey string) (bin []byte, hit bool, err error) {
	nv, err := loadNVRTC()
	if err != nil {
		return nil, false, err
	}
	src, err := unitSource(defs, u)
	if err != nil {
		return nil, false, err
	}
	opts := []string{"--gpu-architecture=" + arch, "-std=c++17", "-default-device"}
	if nv.major > 12 || nv.major == 12 && nv.minor >= 9 {
		// NVRTC 12.9 and later keep a cache of their own (in
		// ~/.nv/ComputeCache): ours already serves every start after the
		// first, which writing theirs slows by about 0.4 s (H200, youtu:
		// 2.00 s against 1.64-1.78 s)
		opts = append(opts, "--no-cache")
	}
	return nv.cachedCubin(u.name, src, opts, devKey)
}

// unitOf is the name of the unit defining kernel name.
func unitOf(name string) string {
	switch {
	case strings.HasPrefix(name, "mmvq8_"), strings.HasPrefix(name, "mmv1_"), strings.HasPrefix(name, "mmvk1"): // a unit each, named as it
		return name
	case strings.HasPrefix(name, "gemv_"), strings.HasPrefix(name, "gemm_"), strings.HasPrefix(name, "embed_"):
		return "matmul"
	case strings.HasPrefix(name, "moe_route"): // moe_route, moe_router, moe_router8
		return "router"
	case name == "quant_act":
		return "quant_act"
	case strings.HasPrefix(name, "mla_decode") && len(name) > len("mla_decode"): // mla_decode1_T_Q4_0_T_Q4_0: MT 1
		return "mla" + name[len("mla_decode"):len("mla_decode")+1]
	case strings.HasPrefix(name, "attn_decode"):
		return "attn_decode"
	case strings.HasPrefix(name, "attn_"), name == "kv_finish", name == "cache_store":
		return "attention"
	}
	return "basic"
}

// function resolves a kernel by name (context thread not needed: the
// lookup runs there through run); a kernel the modules lack is a bug.
func (b *Backend) function(name string) uintptr {
	f, err := b.lookup(name)
	if err != nil {
		panic(err)
	}
	return f
}

// loadModule loads unit u's cubin on the device into k.
func (b *Backend) loadModule(k *kernels, u string, bin []byte) error {
	var m uintptr
	var err error
	b.run(func() {
		err = b.d.check("cuModuleLoadData "+u, call(b.d.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&bin[0]))))
	})
	if err != nil {
		return err
	}
	k.modules = append(k.modules, m)
	k.unit[u] = m
	return nil
}

// lookup resolves a kernel by name, once (waiting for its unit where that
// compiles in the background). Where no Plan compiled the kernels, the
// first lookup compiles every unit.
func (b *Backend) lookup(name string) (uintptr, error) {
	if b.kernels == nil {
		if err := b.compile(nil, time.Now()); err != nil {
			return 0, err
		}
	}
	if f, ok := b.kernels.fn[name]; ok {
		return f, nil
	}
	var f uintptr
	var err error
	u := unitOf(name)
	m, ok := b.kernels.unit[u]
	if l := b.kernels.later[u]; !ok && l != nil {
		<-l.done
		if l.err != nil { // kept, so that every lookup in the unit gives this error
			return 0, l.err
		}
		delete(b.kernels.later, u)
		if err = b.loadModule(b.kernels, u, l.bin); err != nil {
			return 0, err
		}
		m, ok = b.kernels.unit[u]
	}
	if !ok {
		return 0, fmt.Errorf("cuda: kernel %s: no unit %s compiled for this model", name, u)
	}
	b.run(func() {
		err = b.d.check("cuModuleGetFunction "+name, call(b.d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(cstr(name)))))
	})
	if err != nil {
		return 0, err
	}
	b.kernels.fn[name] = f
	return f, nil
}

// launch is one recorded kernel launch. Every parameter takes one 8-byte
// slot of args; a kernel taking one struct (MV) gets all its slots as one.
// A launch names its kernel (id, name) while recorded; its function is
// found before it runs (resolve).
type launch struct {
	fn          uintptr // 0 until resolved (setKernel, resolve)
	id          int32   // kernelID(name)
	name        string
	grid, block [3]uint32
	a0, n       int
	structArg   bool
	shmem       uint32 // dynamic shared memory bytes
	clustered   bool   // its blocks along y are one thread block cluster (grid2(x, S))
	skip        bool   // a lazily recorded norm nobody needed
	bytes       int64  // device memory the kernel reads and writes, for profiles
	mq          *mq    // the parameters of an mmvq launch, for fusing
}

// launchConfig and launchAttr mirror the driver's CUlaunchConfig and
// CUlaunchAttribute (cuLaunchKernelEx).
type launchConfig struct {
	grid, block [3]uint32
	shmem       uint32
	_           uint32
	stream      uintptr
	attrs       uintptr
	numAttrs    uint32
	_           uint32
}

type launchAttr struct {
	id  uint32
	_   uint32
	val [64]byte
}

// attrProgrammaticSerialization lets a kernel launch while the previous one
// still runs; the kernel orders itself with griddepcontrol.wait.
// attrClusterDimension makes thread block clusters of the launch's blocks
// (Hopper), its value three uint32: blocks along x, y and z.
const (
	attrClusterDimension          = 4
	attrProgrammaticSerialization = 6
)

func grid1(x int) [3]uint32    { return [3]uint32{uint32(max(x, 1)), 1, 1} }
func grid2(x, y int) [3]uint32 { return [3]uint32{uint32(max(x, 1)), uint32(max(y, 1)), 1} }
func grid3(x, y, z int) [3]uint32 {
	return [3]uint32{uint32(max(x, 1)), uint32(max(y, 1)), uint32(max(z, 1))}
}

// record appends a launch of kernel name.
func (b *Backend) record(name string, grid, block [3]uint32, bytes int64, args ...uint64) {
	if b.kv == nil {
		panic("cuda: a pass before the cache was allocated")
	}
	if b.pendStore != nil { // something other than its attention came next
		b.launches[b.pendStore.launch].skip = false
		b.pendStore = nil
	}
	b.launches = append(b.launches, launch{grid: grid, block: block, a0: len(b.args), n: len(args), bytes: bytes})
	b.args = append(b.args, args...)
	b.setKernel(&b.launches[len(b.launches)-1], name)
}

// kernelID numbers the kernels by name, so that a recorded launch names its
// kernel without its unit having compiled (Plan records a step first): the
// launches compare and hash their kernels by it, and resolve finds its
// function (fns) once, before the first launch of it runs.
func (b *Backend) kernelID(name string) int32 {
	id, ok := b.kernelIDs[name]
	if !ok {
		id = int32(len(b.fns))
		b.kernelIDs[name] = id
		b.fns = append(b.fns, 0)
	}
	return id
}

// setKernel makes kernel name launch l's, with its function where one of
// its launches was resolved before (every launch of a steady decode step),
// else noting that the pass has launches for resolve.
func (b *Backend) setKernel(l *launch, name string) {
	l.id, l.name = b.kernelID(name), name
	l.fn = b.fns[l.id]
	b.unresolved = b.unresolved || l.fn == 0
}

// resolve sets the function of every recorded launch that has none yet,
// waiting for a unit that still compiles in the background (and compiling
// every unit first where no Plan did), and raises its limit of dynamic
// shared memory where the launch asks past it. It runs before the recorded
// launches go to the context's thread (flushPass, readBack, queueAnswer),
// where a lookup, which runs there itself, cannot.
func (b *Backend) resolve() {
	if !b.unresolved {
		return
	}
	for i := range b.launches {
		l := &b.launches[i]
		if l.fn != 0 {
			continue
		}
		if b.fns[l.id] == 0 {
			b.fns[l.id] = b.function(l.name)
		}
		l.fn = b.fns[l.id]
		b.raiseShared(l)
	}
	b.unresolved = false
}

// errUnresolved is a launch issued before resolve found its function: a bug.
var errUnresolved = errors.New("its kernel was not resolved")

// flushPass runs the recorded launches and waits for them.
func (b *Backend) flushPass() {
	b.resolve()
	b.run(b.flush)
}

// withShared gives the last launch n bytes of dynamic shared memory.
func (b *Backend) withShared(n int) { b.sharedAt(len(b.launches)-1, n) }

// sharedAt gives launch i n bytes of dynamic shared memory, raising its
// kernel's limit now where its function is known (else resolve does).
func (b *Backend) sharedAt(i, n int) {
	l := &b.launches[i]
	l.shmem = uint32(n)
	if l.fn != 0 {
		b.raiseShared(l)
	}
}

// raiseShared lifts launch l's kernel's limit of dynamic shared memory to
// what l asks, where that is past the default.
func (b *Backend) raiseShared(l *launch) {
	if err := b.setShared(l.fn, int(l.shmem)); err != nil {
		panic(fmt.Errorf("cuda: %s needs %d bytes of shared memory: %w", l.name, l.shmem, err))
	}
}

// setShared lifts kernel fn's limit of dynamic shared memory to n bytes
// where n is past the default 48 KiB.
func (b *Backend) setShared(fn uintptr, n int) error {
	if n > 48<<10 && b.bigShared[fn] < n {
		var err error
		b.run(func() { err = b.d.check("cuFuncSetAttribute", call(b.d.cuFuncSetAttribute, fn, 8, uintptr(n))) })
		if err != nil {
			return err
		}
		b.bigShared[fn] = n
	}
	return nil
}

// recordStruct appends a launch whose one parameter is the struct in args.
func (b *Backend) recordStruct(name string, grid, block [3]uint32, bytes int64, args ...uint64) {
	b.record(name, grid, block, bytes, args...)
	b.launches[len(b.launches)-1].structArg = true
}

// signature hashes the recorded launches: equal signatures replay one graph.
// It runs every token, so it mixes whole words (a byte-wise hash took
// ~100 µs of host time per token).
func (b *Backend) signature() uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	mix := func(v uint64) {
		h ^= v * 0xbf58476d1ce4e5b9
		h = (h<<31 | h>>33) * 0x94d049bb133111eb
	}
	for _, l := range b.launches {
		if l.skip {
			continue
		}
		mix(uint64(l.id))
		mix(uint64(l.grid[0]) | uint64(l.grid[1])<<32)
		mix(uint64(l.grid[2]) | uint64(l.block[0])<<32)
		mix(uint64(l.n) | uint64(l.shmem)<<32)
		for _, a := range b.args[l.a0 : l.a0+l.n] {
			mix(a)
		}
	}
	return h ^ h>>29
}

// issue launches the recorded kernels on the stream (context thread).
func (b *Backend) issue() error {
	d := b.d
	for i := range b.launches {
		l := &b.launches[i]
		if l.skip {
			continue
		}
		if l.fn == 0 {
			return fmt.Errorf("launch %s: %w", l.name, errUnresolved)
		}
		if cap(b.ptrs) < l.n {
			b.ptrs = make([]uintptr, l.n+64)
		}
		ptrs := b.ptrs[:l.n]
		for j := range ptrs {
			ptrs[j] = uintptr(unsafe.Pointer(&b.args[l.a0+j]))
		}
		if l.structArg {
			ptrs = ptrs[:1]
		}
		var argp uintptr // a kernel without parameters takes none
		if len(ptrs) > 0 {
			argp = uintptr(unsafe.Pointer(&ptrs[0]))
		}
		var ev0 uintptr
		if b.prof != nil {
			ev0 = b.prof.before(b)
		}
		var r uintptr
		if b.pdl || l.clustered {
			n := 0
			if b.pdl { // every kernel orders itself (pdl_entry), so any may start before the previous one ends
				b.exAttrs[n] = launchAttr{id: attrProgrammaticSerialization}
				b.exAttrs[n].val[0] = 1
				n++
			}
			if l.clustered {
				b.exAttrs[n] = launchAttr{id: attrClusterDimension}
				binary.LittleEndian.PutUint32(b.exAttrs[n].val[0:], 1)
				binary.LittleEndian.PutUint32(b.exAttrs[n].val[4:], l.grid[1])
				binary.LittleEndian.PutUint32(b.exAttrs[n].val[8:], 1)
				n++
			}
			b.exConf = launchConfig{grid: l.grid, block: l.block, shmem: l.shmem, stream: b.stream,
				attrs: uintptr(unsafe.Pointer(&b.exAttrs[0])), numAttrs: uint32(n)}
			r = call(d.cuLaunchKernelEx, uintptr(unsafe.Pointer(&b.exConf)), l.fn, argp, 0)
		} else {
			r = call(d.cuLaunchKernel, l.fn, uintptr(l.grid[0]), uintptr(l.grid[1]), uintptr(l.grid[2]),
				uintptr(l.block[0]), uintptr(l.block[1]), uintptr(l.block[2]), uintptr(l.shmem), b.stream, argp, 0)
		}
		if r != 0 {
			return d.check("launch "+l.name, r)
		}
		if b.prof != nil {
			b.prof.after(b, ev0, l)
		}
	}
	return nil
}

// flush runs the recorded launches and returns with the stream idle
// (context thread).
func (b *Backend) flush() {
	if len(b.launches) == 0 {
		return
	}
	err := b.submit(nil)
	if err == nil {
		err = b.d.check("cuStreamSynchronize", call(b.d.cuStreamSynchronize, b.stream))
	}
	if err != nil {
		panic(fmt.Errorf("cuda: %w", err))
	}
}

// submit queues the recorded launches on the stream without waiting
// (context thread): the tokens and positions go up first (through s's
// pinned words for a one-token pass of ArgmaxAsync or DrawAsync), then a decode step
// replays its graph (recording it the first time) and anything else
// launches directly.
func (b *Backend) submit(s *slot) error {
	d := b.d
	for _, r := range b.pendRope { // nobody consumed them in this flush: they run where recorded
		b.launches[r.launch].skip = false
	}
	b.pendRope = b.pendRope[:0]
	if b.pendStore != nil {
		b.launches[b.pendStore.launch].skip = false
		b.pendStore = nil
	}
	if err := b.stage(s); err != nil {
		return err
	}
	var err error
	if b.T == 1 && !b.NoGraphs && b.prof == nil {
		sig := b.signature()
		g, ok := b.graphs[sig]
		if !ok {
			g, err = b.capture()
			if err != nil && b.pdl && !errors.Is(err, errUnresolved) { // a driver that cannot record programmatic launches: plain ones
				b.pdl = false
				g, err = b.capture()
			}
			if err == nil {
				b.graphs[sig] = g
			}
		}
		if err == nil {
			err = d.check("cuGraphLaunch", call(d.cuGraphLaunch, g, b.stream))
		}
	} else {
		err = b.issue()
	}
	if err != nil {
		return err
	}
	for _, l := range b.launches {
		if !l.skip {
			b.nLaunch++
		}
	}
	for _, p := range b.pending {
		p.flushed = true
	}
	b.launches = b.launches[:0]
	b.args = b.args[:0]
	return nil
}

// stage copies the pass's tokens and positions to the device; after
// BeginNext only the positions, the token being the last answer already
// there. A one-token pass with a slot copies them from its pinned words
// in stream order, behind the passes still queued; any other waits for the
// queue to drain and copies from the staging buffer.
func (b *Backend) stage(s *slot) error {
	if !b.stagePending {
		return nil
	}
	b.stagePending = false
	if !b.fromDevice {
		b.chained = false
	}
	d := b.d
	if s != nil && b.T == 1 {
		s.host[0], s.host[1] = b.tokens[0], b.pos[0]
		if !b.fromDevice {
			if err := d.check("upload token", call(d.cuMemcpyHtoDAsync, b.tokDev, uintptr(unsafe.Pointer(&s.host[0])), 4, b.stream)); err != nil {
				return err
			}
		}
		return d.check("upload position", call(d.cuMemcpyHtoDAsync, b.posDev(), uintptr(unsafe.Pointer(&s.host[1])), 4, b.stream))
	}
	if b.unanswered > 0 {
		if err := d.check("cuStreamSynchronize", call(d.cuStreamSynchronize, b.stream)); err != nil {
			return err
		}
	}
	n := int64(8 * b.tokCap)
	if err := b.ensureStaging(n); err != nil {
		return err
	}
	st := unsafe.Slice((*int32)(hostPtr(b.staging)), 2*b.tokCap)
	copy(st, b.tokens)
	copy(st[b.tokCap:], b.pos)
	if b.fromDevice {
		return d.check("upload positions", call(d.cuMemcpyHtoD, b.posDev(), b.staging+uintptr(4*b.tokCap), uintptr(n/2)))
	}
	return d.check("upload tokens", call(d.cuMemcpyHtoD, b.tokDev, b.staging, uintptr(n)))
}

// capture records the launches into a graph and instantiates it.
func (b *Backend) capture() (uintptr, error) {
	d := b.d
	if err := d.check("cuStreamBeginCapture", call(d.cuStreamBeginCapture, b.stream, 2)); err != nil {
		return 0, err
	}
	ierr := b.issue()
	var g uintptr
	if err := d.check("cuStreamEndCapture", call(d.cuStreamEndCapture, b.stream, uintptr(unsafe.Pointer(&g)))); err != nil {
		return 0, err
	}
	if ierr != nil {
		call(d.cuGraphDestroy, g)
		return 0, ierr
	}
	var exec uintptr
	err := d.check("cuGraphInstantiate", call(d.cuGraphInstantiate, uintptr(unsafe.Pointer(&exec)), g, 0))
	call(d.cuGraphDestroy, g)
	if err != nil {
		return 0, err
	}
	if len(b.graphs) > 64 { // a bound for callers whose passes never repeat
		for k, e := range b.graphs {
			call(d.cuGraphExecDestroy, e)
			delete(b.graphs, k)
		}
	}
	return exec, nil
}

// The activation roundings: what ggml does to the activations before a dot
// product with a weight of a given type (its vec_dot_type), so that the
// logits match llama.cpp's: none, F16, BF16, Q8_0 blocks of 32 with an f16
// scale, Q8_K blocks of 256 with a float32 scale (and sums of 16). The
// kernels know them as ROUND_NONE ... ROUND_Q8_K (fixedDefines).
const (
	roundNone = iota
	roundF16
	roundBF16
	roundQ8_0
	roundQ8_K
)

// roundMode is the activation rounding ggml applies before a dot product
// with weights of type t (see backend/cpu/actquant.go).
func roundMode(t quant.Type) int {
	switch t {
	case quant.F32:
		return roundNone
	case quant.F16:
		return roundF16
	case quant.BF16:
		return roundBF16
	case quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS:
		return roundQ8_K
	}
	return roundQ8_0
}
