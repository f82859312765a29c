package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// NVRTC, the run-time CUDA C++ compiler, loaded like the driver. Kernels are
// compiled to a cubin for the device at hand and cached on disk under a key
// made of the source, the options, the driver, NVRTC and the device.

type nvrtc struct {
	create, compile, logSize, log, cubinSize, cubin, destroy, errString, version uintptr
	major, minor                                                                 int32
}

var (
	nvrtcOnce sync.Once
	nvrtcLib  *nvrtc
	nvrtcErr  error
)

func nvrtcCandidates() []string {
	var c []string
	if p := os.Getenv("LATENT_NVRTC"); p != "" {
		c = append(c, p)
	}
	for _, v := range []string{"13", "12"} {
		c = append(c, "libnvrtc.so."+v)
	}
	c = append(c, "libnvrtc.so")
	for _, pat := range []string{"/usr/local/cuda/lib64/libnvrtc.so*", "/usr/local/cuda/targets/*/lib/libnvrtc.so*",
		"/usr/local/cuda-*/lib64/libnvrtc.so*", "/usr/lib/x86_64-linux-gnu/libnvrtc.so*",
		"/usr/local/lib/python3*/dist-packages/nvidia/cu1*/lib/libnvrtc.so*",
		"/usr/local/lib/python3*/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu1*/lib/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if !strings.Contains(filepath.Base(p), "builtins") && !strings.HasSuffix(p, ".alt") {
				c = append(c, p)
			}
		}
	}
	return c
}

func loadNVRTC() (*nvrtc, error) {
	nvrtcOnce.Do(func() { nvrtcLib, nvrtcErr = openNVRTC() })
	return nvrtcLib, nvrtcErr
}

func openNVRTC() (*nvrtc, error) {
	var lib uintptr
	for _, p := range nvrtcCandidates() {
		if h, err := dlopen(p); err == nil {
			lib = h
			break
		}
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w: cannot load NVRTC (libnvrtc.so.13 or .12): install the CUDA toolkit's runtime compiler (apt install cuda-nvrtc-13-0, or pip install nvidia-cuda-nvrtc), or set LATENT_NVRTC to the library's path", ErrNoDevice)
	}
	n := &nvrtc{}
	if missing := bind(lib, []symbol{
		{&n.create, "nvrtcCreateProgram"}, {&n.compile, "nvrtcCompileProgram"},
		{&n.logSize, "nvrtcGetProgramLogSize"}, {&n.log, "nvrtcGetProgramLog"},
		{&n.cubinSize, "nvrtcGetCUBINSize"}, {&n.cubin, "nvrtcGetCUBIN"},
		{&n.destroy, "nvrtcDestroyProgram"}, {&n.errString, "nvrtcGetErrorString"},
		{&n.version, "nvrtcVersion"},
	}); missing != "" {
		return nil, fmt.Errorf("%w: NVRTC has no %s (install NVRTC from CUDA 12 or newer)", ErrNoDevice, missing)
	}
	call(n.version, uintptr(unsafe.Pointer(&n.major)), uintptr(unsafe.Pointer(&n.minor)))
	return n, nil
}

// cstr is a NUL-terminated copy of s.
func cstr(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// compileCubin compiles src for arch (e.g. "sm_90") and returns the cubin.
func (n *nvrtc) compileCubin(name, src string, opts []string) ([]byte, error) {
	var prog uintptr
	csrc, cname := cstr(src), cstr(name)
	if r := call(n.create, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(csrc)), uintptr(unsafe.Pointer(cname)), 0, 0, 0); r != 0 {
		return nil, fmt.Errorf("nvrtcCreateProgram %s: %s", name, goString(call(n.errString, r)))
	}
	defer call(n.destroy, uintptr(unsafe.Pointer(&prog)))
	copts := make([]*byte, len(opts))
	for i, o := range opts {
		copts[i] = cstr(o)
	}
	r := call(n.compile, prog, uintptr(len(opts)), uintptr(unsafe.Pointer(&copts[0])))
	if r != 0 {
		var size uintptr
		call(n.logSize, prog, uintptr(unsafe.Pointer(&size)))
		log := make([]byte, size+1)
		call(n.log, prog, uintptr(unsafe.Pointer(&log[0])))
		return nil, fmt.Errorf("compile kernels %s: %s\n%s", name, goString(call(n.errString, r)), strings.TrimRight(string(log[:size]), "\x00\n"))
	}
	var size uintptr
	if r := call(n.cubinSize, prog, uintptr(unsafe.Pointer(&size))); r != 0 {
		return nil, fmt.Errorf("nvrtcGetCUBINSize %s: %s", name, goString(call(n.errString, r)))
	}
	bin := make([]byte, size)
	if r := call(n.cubin, prog, uintptr(unsafe.Pointer(&bin[0]))); r != 0 {
		return nil, fmt.Errorf("nvrtcGetCUBIN %s: %s", name, goString(call(n.errString, r)))
	}
	return bin, nil
}

// cachedCubin returns the cubin of src from the disk cache, compiling and
// storing it on a miss. hit says whether the cache answered.
func (n *nvrtc) cachedCubin(name, src string, opts []string, deviceKey string) (bin []byte, hit bool, err error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00%s\x00", src, strings.Join(opts, " "), n.major, n.minor, deviceKey)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := cacheDir()
	path := filepath.Join(dir, name+"-"+key+".cubin")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return b, true, nil
	}
	bin, err = n.compileCubin(name, src, opts)
	if err != nil {
		return nil, false, err
	}
	// A failed write only costs the next start a compile; write atomically so
	// a concurrent reader never sees half a file.
	if os.MkdirAll(dir, 0o755) == nil {
		if f, err := os.CreateTemp(dir, ".tmp-*"); err == nil {
			_, werr := f.Write(bin)
			cerr := f.Close()
			if werr == nil && cerr == nil {
				os.Rename(f.Name(), path)
			} else {
				os.Remove(f.Name())
			}
		}
	}
	return bin, false, nil
}
