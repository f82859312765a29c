package cuda

import (
	"bytes"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// A Q6_K matrix keeps its blocks in order on the device, each in a
// q6kSlot-byte slot whose padding is zero; rows are whole slots.
func TestRepackQ6K(t *testing.T) {
	const rows, K = 3, 512
	nb := int64(K / 256)
	data := make([]byte, rows*nb*210)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	out, rb := repack(quant.Q6_K, data, rows, K)
	if rb != nb*q6kSlot || int64(len(out)) != rows*rb || rb%16 != 0 {
		t.Fatalf("row bytes %d, %d bytes in all; want %d a row", rb, len(out), nb*q6kSlot)
	}
	for i := int64(0); i < rows*nb; i++ {
		slot := out[i*q6kSlot : (i+1)*q6kSlot]
		if !bytes.Equal(slot[:210], data[i*210:(i+1)*210]) {
			t.Errorf("block %d moved or changed", i)
		}
		if !bytes.Equal(slot[210:], make([]byte, q6kSlot-210)) {
			t.Errorf("block %d: padding %v, want zeros", i, slot[210:])
		}
	}
}
