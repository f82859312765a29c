package cpu

import "github.com/latent-ai/latent/backend"

// Argmax sets dst[r] to the index of row r's largest value, the first on
// ties (backend.Backend.Argmax). The scan starts from the first value and moves
// only on a strictly larger one, so NaN is never picked over a number and a
// leading NaN keeps index 0, as engine.Argmax does.
func (c *CPU) Argmax(t backend.Tensor, dst []int32) {
	p := t.(*tensor)
	for r := 0; r < p.rows; r++ {
		row := p.row(r)
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		dst[r] = int32(best)
	}
	c.launches++
}
