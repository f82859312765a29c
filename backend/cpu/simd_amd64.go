package cpu

import "github.com/latent-ai/latent/quant"

// addSIMDKernels replaces the pure-Go kernels with assembly ones where the
// CPU has the instructions; force ("avx2") caps the instruction set.
func addSIMDKernels(ks map[quant.Type]dotKernel, force string) string {
	return "generic"
}
