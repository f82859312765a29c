package cpu

import (
	"fmt"

	"github.com/latent-ai/latent/backend"
)

// answer is an ArgmaxAsync answer: the CPU runs every operation when it is
// called, so it is known at once.
type answer int32

func (a answer) Wait() int32 { return int32(a) }

// ArgmaxAsync is Argmax of t's one row (backend.Backend.ArgmaxAsync). The
// pass's tokens have been embedded by now, so the answer is kept as its
// first token, where BeginNext takes it from, as the GPU keeps it in its
// device copy of the tokens.
func (c *CPU) ArgmaxAsync(t backend.Tensor) backend.Pending {
	if t.Rows() != 1 || len(c.tokens) == 0 {
		panic(fmt.Sprintf("cpu: argmax async: %d rows in a pass of %d tokens (want one row)", t.Rows(), len(c.tokens)))
	}
	var best [1]int32
	c.Argmax(t, best[:])
	c.tokens[0] = best[0]
	return answer(best[0])
}

// BeginNext starts a pass of one token at pos: the answer of the last
// ArgmaxAsync (backend.Backend.BeginNext).
func (c *CPU) BeginNext(pos int32) {
	if len(c.tokens) == 0 {
		panic("cpu: begin next: no pass before")
	}
	tok := [1]int32{c.tokens[0]}
	at := [1]int32{pos}
	c.Begin(tok[:], at[:])
}
