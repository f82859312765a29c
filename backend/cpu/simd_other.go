//go:build !amd64

package cpu

import "github.com/latent-ai/latent/quant"

// addSIMDKernels has nothing to add on this architecture.
func addSIMDKernels(map[quant.Type]kernel, string) string { return "generic" }

// simdVecOps has nothing to offer on this architecture.
func simdVecOps() (func(x, y []float32) float32, func(out, v []float32, s float32)) {
	return nil, nil
}

// simdQuantQ8_0 has nothing to offer on this architecture.
func simdQuantQ8_0() func(x []float32, qs []int8, d []float32, b8 []int32) { return nil }
