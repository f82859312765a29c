package cpu

import (
	"fmt"
	"os"
)

// forcedSet is LATENT_CPU, read once at start: the kernel set the tests (or
// a user) force, "generic" or "avx2"; empty for the best the CPU runs.
var forcedSet = os.Getenv("LATENT_CPU")

// CheckEnv reports a LATENT_CPU this backend cannot honour: a kernel set it
// does not know, or one this CPU cannot run (the backend would otherwise
// fall back to another set without a word).
func CheckEnv() error { return checkSet(forcedSet) }

func checkSet(v string) error {
	switch v {
	case "", "generic":
		return nil
	case "avx2":
		if _, set := chooseKernels(v); set != "avx2" {
			return fmt.Errorf("LATENT_CPU=avx2: this CPU has no AVX2 and FMA (unset it, or use generic)")
		}
		return nil
	default:
		return fmt.Errorf("LATENT_CPU=%s: unknown kernel set (generic or avx2; unset, the best this CPU runs)", v)
	}
}
