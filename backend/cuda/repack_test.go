package cuda

import (
	"bytes"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// A Q4_0 or Q8_0 row holds its blocks' quant bytes in order, then their
// scales, then zeros to a multiple of 16 bytes; a Q6_K row its blocks in
// order, each in a q6kSlot-byte slot whose padding is zero; whatever the
// buffer held before. A matrix big enough to be repacked in row ranges
// side by side comes out the same.
func TestRepackIntoRows(t *testing.T) {
	for _, c := range []struct {
		typ     quant.Type
		rows, K int64
	}{
		{quant.Q4_0, 3, 96}, {quant.Q8_0, 5, 64}, {quant.Q4_0, 70000, 256}, {quant.Q8_0, 9000, 1024}, {quant.Q6_K, 3, 512}, {quant.Q6_K, 20000, 256},
	} {
		qb, raw := int64(16), int64(18)
		if c.typ == quant.Q8_0 {
			qb, raw = 32, 34
		}
		nb := c.K / 32
		in, out := nb*raw, repackedRow(c.typ, c.K)
		if c.typ == quant.Q6_K {
			nb, in = c.K/256, c.K/256*210
			if out != nb*q6kSlot {
				t.Fatalf("Q6_K rows of %d values take %d bytes, want %d", c.K, out, nb*q6kSlot)
			}
		}
		if out%16 != 0 {
			t.Fatalf("%v rows of %d values take %d bytes, not a multiple of 16", c.typ, c.K, out)
		}
		data := make([]byte, c.rows*in)
		for i := range data {
			data[i] = byte(i*131 + i>>9)
		}
		dst := bytes.Repeat([]byte{0xa5}, int(c.rows*out))
		repackInto(c.typ, dst, data, c.rows, c.K)
		for r := int64(0); r < c.rows; r++ {
			src, row := data[r*in:(r+1)*in], dst[r*out:(r+1)*out]
			if c.typ == quant.Q6_K {
				for b := int64(0); b < nb; b++ {
					slot := row[b*q6kSlot : (b+1)*q6kSlot]
					if !bytes.Equal(slot[:210], src[b*210:(b+1)*210]) || !bytes.Equal(slot[210:], make([]byte, q6kSlot-210)) {
						t.Fatalf("%v rows %d: row %d block %d wrong", c.typ, c.rows, r, b)
					}
				}
				continue
			}
			for b := int64(0); b < nb; b++ {
				if !bytes.Equal(row[b*qb:(b+1)*qb], src[b*raw+2:(b+1)*raw]) || !bytes.Equal(row[nb*qb+2*b:nb*qb+2*b+2], src[b*raw:b*raw+2]) {
					t.Fatalf("%v rows %d: row %d block %d wrong", c.typ, c.rows, r, b)
				}
			}
			if pad := row[nb*(qb+2):]; !bytes.Equal(pad, make([]byte, len(pad))) {
				t.Fatalf("%v rows %d: row %d padding %v, want zeros", c.typ, c.rows, r, pad)
			}
		}
	}
}
