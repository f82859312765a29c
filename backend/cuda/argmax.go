package cuda

import (
	"fmt"
	"unsafe"

	"github.com/latent-ai/latent/backend"
)

// Argmax sets dst[r] to the index of row r's largest value, the first on
// ties (backend.Backend.Argmax; NaN rules in kernels/basic.cu). The argmax kernel
// is recorded with the pass, so a decode step's graph ends with it, and
// only 4 bytes per row come back.
func (b *Backend) Argmax(t backend.Tensor, dst []int32) {
	p := tens(t)
	if len(dst) < p.rows {
		panic(fmt.Sprintf("cuda: argmax of %d rows into %d", p.rows, len(dst)))
	}
	if p.rows == 0 {
		return
	}
	if p.cols == 0 {
		clear(dst[:p.rows])
		return
	}
	b.reads(p)
	out := b.scratch(int64(4 * p.rows))
	b.record("argmax", grid1(p.rows), [3]uint32{1024, 1, 1}, int64(p.rows)*int64(p.cols)*4,
		uint64(out), uint64(p.ptr), uint64(p.stride), uint64(p.cols))
	if err := b.readBack(out, int64(4*p.rows)); err != nil {
		panic(fmt.Errorf("cuda: argmax: %w", err))
	}
	copy(dst, unsafe.Slice((*int32)(hostPtr(b.staging)), p.rows))
}
