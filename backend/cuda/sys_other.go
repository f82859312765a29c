//go:build !linux

package cuda

import "errors"

const dlSupported = false

func dlopen(path string) (uintptr, error) {
	return 0, errors.New("the CUDA backend runs on Linux only")
}

func dlsym(lib uintptr, name string) (uintptr, error) {
	return 0, errors.New("the CUDA backend runs on Linux only")
}

func call(fn uintptr, args ...uintptr) uintptr { panic("cuda: no driver on this system") }
