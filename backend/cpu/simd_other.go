//go:build !amd64

package cpu

import "github.com/latent-ai/latent/quant"

// addSIMDKernels has nothing to add on this architecture.
func addSIMDKernels(map[quant.Type]kernel, string) string { return "generic" }
