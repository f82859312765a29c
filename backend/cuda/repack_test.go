package cuda

import (
	"bytes"
	"testing"
	"unsafe"

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

// A weight's device bytes made a range of rows at a time (what upload puts
// in each pinned buffer, ranges crossing the parts' boundaries) are the
// bytes made all at once, whatever the buffer held: for Q4_0, Q8_0 and
// Q6_K those repackInto makes of the parts joined, for the other types
// the parts joined, and for a vector its float32 values.
func TestHostBytesInRanges(t *testing.T) {
	for _, c := range []struct {
		typ  quant.Type
		dims []uint64
	}{
		{quant.Q4_0, []uint64{96, 37}}, {quant.Q8_0, []uint64{64, 2, 19}}, {quant.Q6_K, []uint64{512, 23}},
		{quant.Q4_K, []uint64{256, 29}}, {quant.F32, []uint64{8, 31}}, {quant.F16, []uint64{64}}, {quant.F32, []uint64{40}},
	} {
		rb, err := c.typ.RowBytes(int64(c.dims[0]))
		if err != nil {
			t.Fatal(err)
		}
		rows := int64(1)
		for _, d := range c.dims[1:] {
			rows *= int64(d)
		}
		data := make([]byte, rows*rb)
		for i := range data {
			data[i] = byte(i*37 + i>>7)
		}
		if c.typ == quant.F16 { // finite halves
			for i := 1; i < len(data); i += 2 {
				data[i] &= 0x3b
			}
		}
		cut := rows / 3 * rb // two parts, a third and the rest
		parts := [][]byte{data[:cut], data[cut:]}
		w, h, err := hostWeight("w", c.typ, c.dims, parts)
		if err != nil {
			t.Fatal(err)
		}
		whole := make([]byte, h.rows*h.rowBytes)
		h.fill(whole, 0, h.rows)
		var want []byte
		switch {
		case len(c.dims) == 1 && c.typ != quant.F32:
			v := make([]float32, c.dims[0])
			if err := quant.Dequantize(c.typ, data, v); err != nil {
				t.Fatal(err)
			}
			want = unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
		case c.typ == quant.Q4_0 || c.typ == quant.Q8_0 || c.typ == quant.Q6_K:
			want = make([]byte, rows*repackedRow(c.typ, int64(c.dims[0])))
			repackInto(c.typ, want, data, rows, int64(c.dims[0]))
		default:
			want = data
		}
		if !bytes.Equal(whole, want) || w.rowBytes != h.rowBytes || int64(len(want)) != w.rows*w.rowBytes {
			t.Fatalf("%v %v: all rows at once differ from the expected %d bytes (row %d bytes)", c.typ, c.dims, len(want), w.rowBytes)
		}
		for _, per := range []int64{1, 2, 5, h.rows} {
			got := bytes.Repeat([]byte{0xa5}, len(whole))
			for r0 := int64(0); r0 < h.rows; r0 += per {
				n := min(per, h.rows-r0)
				buf := bytes.Repeat([]byte{0x5a}, int(n*h.rowBytes))
				h.fill(buf, r0, n)
				copy(got[r0*h.rowBytes:], buf)
			}
			if !bytes.Equal(got, whole) {
				t.Errorf("%v %v: %d rows a range differ from all at once", c.typ, c.dims, per)
			}
		}
	}
}
