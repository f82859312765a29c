//go:build linux

package cuda

import "github.com/ebitengine/purego"

const dlSupported = true

// dlopen loads a shared library with its symbols resolved now.
func dlopen(path string) (uintptr, error) {
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
