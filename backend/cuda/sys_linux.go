//go:build linux

package cuda

import (
	"runtime"

	"github.com/ebitengine/purego"
)

const dlSupported = true

// dlopen loads a shared library with its symbols resolved now. The thread
// is held for the call: dlerror's message is the calling thread's, and a
// goroutine moved between dlopen and dlerror read an empty one (a missing
// libcuda's error said "cannot load libcuda.so.1 ()" now and then).
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

// call invokes a C function. Pointers converted to uintptr in the call's
// arguments stay where they are until it returns (go:uintptrescapes moves
// their targets to the heap, which never moves).
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
