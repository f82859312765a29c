package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

// The CUDA driver API, loaded at run time from libcuda (no cgo). Every
// function returns a CUresult; check turns a non-zero one into an error
// that names the call and the driver's own description.

// ErrNoDevice says that no CUDA driver or device is usable here.
var ErrNoDevice = errors.New("no CUDA device")

type driver struct {
	lib uintptr

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName    uintptr
	cuDeviceGetAttribute, cuDeviceTotalMem, cuDevicePrimaryCtxRetain              uintptr
	cuDevicePrimaryCtxRelease, cuCtxSetCurrent                                    uintptr
	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost, cuMemGetInfo            uintptr
	cuMemcpyHtoD, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemsetD8                uintptr
	cuModuleLoadData, cuModuleGetFunction, cuFuncSetAttribute, cuLaunchKernel     uintptr
	cuStreamCreate, cuStreamSynchronize, cuStreamBeginCapture, cuStreamEndCapture uintptr
	cuGraphInstantiate, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy         uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime          uintptr
	cuEventDestroy, cuGetErrorString, cuModuleUnload                              uintptr
	cuOccupancyMaxActiveBlocksPerMultiprocessor                                   uintptr
	cuLaunchKernelEx                                                              uintptr // optional (CUDA 12): programmatic dependent launch
}

var (
	drvOnce sync.Once
	drv     *driver
	drvErr  error
)

// libcudaPaths are where the driver library is looked for, in order.
var libcudaPaths = []string{"libcuda.so.1", "libcuda.so", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
	"/usr/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"}

// loadDriver opens libcuda once and resolves every function the backend uses.
func loadDriver() (*driver, error) {
	drvOnce.Do(func() { drv, drvErr = openDriver() })
	return drv, drvErr
}

func openDriver() (*driver, error) {
	if !dlSupported {
		return nil, fmt.Errorf("%w: the CUDA backend runs on Linux only", ErrNoDevice)
	}
	var lib uintptr
	var first error
	for _, p := range libcudaPaths {
		h, err := dlopen(p)
		if err == nil {
			lib = h
			break
		}
		if first == nil {
			first = err
		}
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w: cannot load libcuda.so.1 (%v): install the NVIDIA driver (e.g. apt install nvidia-driver-580 or the CUDA toolkit's driver)", ErrNoDevice, first)
	}
	d := &driver{lib: lib}
	syms := []symbol{
		{&d.cuInit, "cuInit"}, {&d.cuDriverGetVersion, "cuDriverGetVersion"},
		{&d.cuDeviceGetCount, "cuDeviceGetCount"}, {&d.cuDeviceGet, "cuDeviceGet"},
		{&d.cuDeviceGetName, "cuDeviceGetName"}, {&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"}, {&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"}, {&d.cuCtxSetCurrent, "cuCtxSetCurrent"},
		{&d.cuMemAlloc, "cuMemAlloc_v2"}, {&d.cuMemFree, "cuMemFree_v2"},
		{&d.cuMemAllocHost, "cuMemAllocHost_v2"}, {&d.cuMemFreeHost, "cuMemFreeHost"},
		{&d.cuMemGetInfo, "cuMemGetInfo_v2"},
		{&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
		{&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&d.cuMemsetD8, "cuMemsetD8_v2"},
		{&d.cuModuleLoadData, "cuModuleLoadData"}, {&d.cuModuleUnload, "cuModuleUnload"},
		{&d.cuModuleGetFunction, "cuModuleGetFunction"},
		{&d.cuFuncSetAttribute, "cuFuncSetAttribute"}, {&d.cuLaunchKernel, "cuLaunchKernel"},
		{&d.cuStreamCreate, "cuStreamCreate"}, {&d.cuStreamSynchronize, "cuStreamSynchronize"},
		{&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"}, {&d.cuStreamEndCapture, "cuStreamEndCapture"},
		{&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"}, {&d.cuGraphLaunch, "cuGraphLaunch"},
		{&d.cuGraphExecDestroy, "cuGraphExecDestroy"}, {&d.cuGraphDestroy, "cuGraphDestroy"},
		{&d.cuEventCreate, "cuEventCreate"}, {&d.cuEventRecord, "cuEventRecord"},
		{&d.cuEventSynchronize, "cuEventSynchronize"}, {&d.cuEventElapsedTime, "cuEventElapsedTime"},
		{&d.cuEventDestroy, "cuEventDestroy_v2"}, {&d.cuGetErrorString, "cuGetErrorString"},
		{&d.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"},
	}
	if missing := bind(lib, syms); missing != "" {
		return nil, fmt.Errorf("%w: libcuda has no %s (driver too old: install a driver for CUDA 12 or newer)", ErrNoDevice, missing)
	}
	d.cuLaunchKernelEx, _ = dlsym(lib, "cuLaunchKernelEx")
	if r := call(d.cuInit, 0); r != 0 {
		return nil, fmt.Errorf("%w: cuInit: %s", ErrNoDevice, d.errString(r))
	}
	return d, nil
}

// symbol is a library function that bind resolves into *p.
type symbol struct {
	p    *uintptr
	name string
}

// bind resolves every symbol in lib and returns the name of the first one
// lib lacks ("" when it has them all).
func bind(lib uintptr, syms []symbol) string {
	for _, s := range syms {
		p, err := dlsym(lib, s.name)
		if err != nil {
			return s.name
		}
		*s.p = p
	}
	return ""
}

// cuError is a failed driver call.
type cuError struct {
	call string
	code uintptr
	msg  string
}

func (e *cuError) Error() string { return fmt.Sprintf("%s: %s (CUDA error %d)", e.call, e.msg, e.code) }

const errOutOfMemory = 2

func (d *driver) errString(r uintptr) string {
	var s uintptr
	if call(d.cuGetErrorString, r, uintptr(unsafe.Pointer(&s))) != 0 || s == 0 {
		return "unknown error"
	}
	return goString(s)
}

func (d *driver) check(name string, r uintptr) error {
	if r == 0 {
		return nil
	}
	return &cuError{call: name, code: r, msg: d.errString(r)}
}

// goString copies a NUL-terminated C string.
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	n := 0
	for *(*byte)(hostPtr(p + uintptr(n))) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(hostPtr(p)), n))
}

// device attributes (CUdevice_attribute)
const (
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
	attrSharedOptin     = 97
)

// Available reports whether a CUDA device can be used, and why not.
func Available() error {
	d, err := loadDriver()
	if err != nil {
		return err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the driver sees no GPU", ErrNoDevice)
	}
	return nil
}

// cacheDir is where compiled kernels are kept.
func cacheDir() string {
	if d := os.Getenv("LATENT_KERNEL_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "latent", "kernels")
}

// hostPtr turns an address that C code handed out (pinned host memory, a C
// string) into a pointer; such memory is not the Go heap's.
func hostPtr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
