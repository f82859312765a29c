package cpu

import "github.com/latent-ai/latent/backend"

// Argmax sets dst[r] to backend.Argmax of row r (backend.Backend.Argmax).
func (c *CPU) Argmax(t backend.Tensor, dst []int32) {
	p := t.(*tensor)
	for r := 0; r < p.rows; r++ {
		dst[r] = backend.Argmax(p.row(r))
	}
	c.launches++
}
