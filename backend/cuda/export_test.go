package cuda

// UnitOf and LoadedUnits let the GPU tests (package cuda_test, which loads
// models) see which units a load compiled.
var UnitOf = unitOf

// LoadedUnits are the units loaded on the device so far.
func (b *Backend) LoadedUnits() map[string]bool {
	loaded := map[string]bool{}
	for u := range b.kernels.unit {
		loaded[u] = true
	}
	return loaded
}

// BackgroundUnits are the units left to compile in the background and not
// yet loaded.
func (b *Backend) BackgroundUnits() []string {
	var us []string
	for u := range b.kernels.later {
		us = append(us, u)
	}
	return us
}
