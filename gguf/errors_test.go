package gguf

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// huge is an absurd count or length, as a corrupt or hostile file claims.
const huge = 1 << 62

type hostileCase struct {
	name      string
	data      []byte
	want      []string // substrings of the error after the file name
	truncated bool     // the error wraps ErrTruncated
}

// hostileCases are broken files, one defect each. They double as fuzz seeds.
func hostileCases() []hostileCase {
	// one tensor "t" of 8 F32 (32 bytes) at offset off, data section of n bytes
	oneTensor := func(off uint64, n int) []byte {
		r := hdr(3, 1, 0).tensor("t", quant.F32, off, 8).pad(32)
		return r.zeros(n).b
	}
	// a file whose only metadata value is built by val
	oneKV := func(key string, t ValueType, val func(r *raw)) []byte {
		r := hdr(3, 0, 1).kv(key, t)
		val(r)
		return r.b
	}
	return []hostileCase{
		{"empty", nil, []string{"not a GGUF file", "magic", "truncated"}, true},
		{"short magic", []byte("GGU"), []string{"not a GGUF file", "truncated"}, true},
		{"wrong magic", []byte("GGML\x03\x00\x00\x00" + strings.Repeat("\x00", 16)), []string{`not a GGUF file: magic is "GGML", want "GGUF"`}, false},
		{"text file", []byte("#!/bin/sh\necho hello\n"), []string{"not a GGUF file", `magic is "#!/b"`}, false},
		{"no version", []byte("GGUF\x03\x00"), []string{"version", "offset 4", "truncated"}, true},
		{"version 0", hdr(0, 0, 0).b, []string{"unknown GGUF version 0"}, false},
		{"version 1", hdr(1, 0, 0).b, []string{"GGUF version 1 is not supported"}, false},
		{"version 4", hdr(4, 0, 0).b, []string{"unknown GGUF version 4"}, false},
		{"big-endian version 3", hdr(3<<24, 0, 0).b, []string{"big-endian GGUF (version 3"}, false},
		{"big-endian version 2", hdr(2<<24, 0, 0).b, []string{"big-endian GGUF (version 2"}, false},
		{"no counts", (&raw{}).u32(Magic).u32(3).u64(0).b, []string{"metadata count", "truncated"}, true},

		{"huge tensor count", hdr(3, huge, 0).zeros(1000).b, []string{"tensor count at offset 8 is 4611686018427387904", "more than the 1008 bytes left"}, false},
		{"huge metadata count", hdr(3, 0, huge).zeros(1000).b, []string{"metadata count at offset 16 is 4611686018427387904"}, false},
		{"max uint64 counts", hdr(3, math.MaxUint64, math.MaxUint64).b, []string{"tensor count", "18446744073709551615"}, false},
		{"counts fit alone, not together", hdr(3, 30, 70).zeros(1000).b, []string{"30 tensors and 70 metadata entries need at least 1870 bytes but only 1000 remain"}, false},
		{"tensor count too large after metadata", hdr(3, 3, 1).kv("k", TypeString).str(strings.Repeat("x", 80)).zeros(20).b,
			[]string{"tensor count 3 is more than the 20 bytes left after the metadata"}, false},
		{"huge key length", hdr(3, 0, 1).u64(huge).zeros(1000).b, []string{"metadata #0: key at offset 24 claims 4611686018427387904 bytes but only 1000 remain"}, true},
		{"truncated key", hdr(3, 0, 1).u64(10).zeros(5).b, []string{"metadata #0: key at offset 24 claims 10 bytes but only 5 remain"}, true},
		{"huge string value", oneKV("s", TypeString, func(r *raw) { r.u64(huge).zeros(1000) }), []string{`metadata "s": string at offset`, "claims 4611686018427387904 bytes"}, true},
		{"huge array length", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeUint8)).u64(huge).zeros(1000) }), []string{`metadata "a": array length`, "is 4611686018427387904, more than"}, false},
		{"huge array of u64", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeUint64)).u64(126).zeros(1000) }), []string{"array length", "is 126, more than the 1000 bytes left"}, false},
		{"huge string array", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeString)).u64(huge).zeros(1000) }), []string{"array length", "4611686018427387904"}, false},
		{"huge string in array", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeString)).u64(2).str("ok").u64(huge).zeros(1000) }),
			[]string{`metadata "a": array element #1: string at offset`, "claims 4611686018427387904 bytes"}, true},
		{"huge nested array", oneKV("a", TypeArray, func(r *raw) {
			r.u32(uint32(TypeArray)).u64(2).u32(uint32(TypeString)).u64(0).u32(uint32(TypeString)).u64(huge).zeros(1000)
		}), []string{"array element #1: array length", "4611686018427387904"}, false},
		{"unknown value type", oneKV("k", ValueType(13), func(r *raw) { r.u64(0) }), []string{`metadata "k": unknown value type 13`}, false},
		{"unknown value type max", oneKV("k", ValueType(math.MaxUint32), func(r *raw) { r.u64(0) }), []string{"unknown value type 4294967295"}, false},
		{"unknown array element type", oneKV("k", TypeArray, func(r *raw) { r.u32(13).u64(1).u64(0) }), []string{`metadata "k": unknown array element type 13`}, false},
		{"unknown nested element type", oneKV("k", TypeArray, func(r *raw) { r.u32(uint32(TypeArray)).u64(1).u32(99).u64(0) }), []string{"array element #0: unknown array element type 99"}, false},
		{"bool 2", oneKV("b", TypeBool, func(r *raw) { r.u8(2) }), []string{`metadata "b": bool value 2 is neither 0 nor 1`}, false},
		{"bool array 255", oneKV("b", TypeArray, func(r *raw) { r.u32(uint32(TypeBool)).u64(3).u8(1).u8(255).u8(0) }), []string{"bool array element #1 is 255"}, false},
		{"truncated value", oneKV("x", TypeUint64, func(r *raw) { r.u32(7) }), []string{`metadata "x": value (8 bytes) at offset`, "truncated"}, true},
		{"truncated array data", oneKV("x", TypeArray, func(r *raw) { r.u32(uint32(TypeFloat32)).u64(4).zeros(15) }), []string{"array length", "is 4, more than the 15 bytes"}, false},
		{"nested too deep", oneKV("d", TypeArray, func(r *raw) {
			for range maxNesting + 1 {
				r.u32(uint32(TypeArray)).u64(1)
			}
			r.zeros(100)
		}), []string{"nested more than 8 deep"}, false},
		{"duplicate key", hdr(3, 0, 2).kv("k", TypeUint8).u8(1).kv("k", TypeUint8).u8(2).b, []string{`metadata key "k" appears twice (entries #0 and #1)`}, false},
		{"long key in message", hdr(3, 0, 2).kv(strings.Repeat("k", 5000), TypeUint8).u8(1).kv(strings.Repeat("k", 5000), TypeUint8).u8(2).b,
			[]string{`appears twice`, `... (5000 bytes)`}, false},
		{"alignment uint64", hdr(3, 0, 1).kv("general.alignment", TypeUint64).u64(32).b, []string{"general.alignment is a uint64, want uint32"}, false},
		{"alignment string", hdr(3, 0, 1).kv("general.alignment", TypeString).str("32").b, []string{"general.alignment is a string, want uint32"}, false},
		{"alignment 48", hdr(3, 0, 1).kv("general.alignment", TypeUint32).u32(48).b, []string{"general.alignment 48 is not a power of two"}, false},
		{"alignment 0", hdr(3, 0, 1).kv("general.alignment", TypeUint32).u32(0).b, []string{"general.alignment 0 is not a power of two"}, false},

		{"huge tensor name", hdr(3, 1, 0).u64(huge).zeros(1000).b, []string{"tensor #0: name at offset 24 claims 4611686018427387904 bytes"}, true},
		{"rank 0", hdr(3, 1, 0).tensor("t", quant.F32, 0).zeros(64).b, []string{`tensor #0 "t": 0 dimensions (must be 1 to 4)`}, false},
		{"rank 5", hdr(3, 1, 0).tensor("t", quant.F32, 0, 1, 1, 1, 1, 1).zeros(64).b, []string{`tensor #0 "t": 5 dimensions (must be 1 to 4)`}, false},
		{"rank huge", hdr(3, 1, 0).str("t").u32(math.MaxUint32).zeros(64).b, []string{"4294967295 dimensions"}, false},
		{"dims overflow", hdr(3, 1, 0).tensor("t", quant.F32, 0, 1<<32, 1<<31).zeros(64).b, []string{`tensor #0 "t": dimensions [4294967296 2147483648] overflow the element count`}, false},
		{"dims overflow past a zero", hdr(3, 1, 0).tensor("t", quant.F32, 0, 0, 1<<40, 1<<40).zeros(64).b, []string{"dimensions [0 1099511627776 1099511627776] overflow"}, false},
		{"dim above MaxInt64", hdr(3, 1, 0).tensor("t", quant.F32, 0, 0, 1<<63).zeros(64).b, []string{"dimensions [0 9223372036854775808] overflow"}, false},
		{"size overflow", hdr(3, 1, 0).tensor("t", quant.F64, 0, 1<<61, 2).zeros(64).b, []string{`tensor #0 "t": F64: 4611686018427387904 weights overflow a size`}, false},
		{"unknown tensor type", hdr(3, 1, 0).tensor("t", quant.Type(31), 0, 32).zeros(64).b, []string{`tensor #0 "t": unknown tensor type 31`}, false},
		{"unknown tensor type max", hdr(3, 1, 0).tensor("t", quant.Type(math.MaxUint32), 0, 32).zeros(64).b, []string{"unknown tensor type 4294967295"}, false},
		{"row length", hdr(3, 1, 0).tensor("t", quant.Q4_0, 0, 33, 32).zeros(64).b, []string{`tensor #0 "t": row length 33 is not a multiple of the Q4_0 block size 32`}, false},
		{"row length k-quant", hdr(3, 1, 0).tensor("t", quant.Q6_K, 0, 32, 8).zeros(64).b, []string{"row length 32 is not a multiple of the Q6_K block size 256"}, false},
		{"truncated tensor info", hdr(3, 1, 0).str(strings.Repeat("n", 20)).u32(2).u64(8).b,
			[]string{`tensor #0 "nnnnnnnnnnnnnnnnnnnn": dimension (8 bytes) at offset 64: file is truncated`}, true},
		{"duplicate tensor", hdr(3, 2, 0).tensor("t", quant.F32, 0, 8).tensor("t", quant.F32, 32, 8).pad(32).zeros(64).b, []string{`tensor "t" appears twice (tensors #0 and #1)`}, false},
		{"misaligned offset", oneTensor(16, 64), []string{`tensor "t": data offset 16 is not a multiple of the alignment 32`}, false},
		{"misaligned offset 64", hdr(3, 1, 1).kv("general.alignment", TypeUint32).u32(64).tensor("t", quant.F32, 32, 8).pad(64).zeros(128).b,
			[]string{"data offset 32 is not a multiple of the alignment 64"}, false},
		{"data past EOF", oneTensor(0, 31), []string{`tensor "t": data [0, 32) runs past the end of the file (31 bytes of data from offset 64)`}, true},
		{"data offset past EOF", oneTensor(1<<40, 64), []string{"data [1099511627776, 1099511627808) runs past the end"}, true},
		{"offset wraps", oneTensor(math.MaxUint64-31, 64), []string{"runs past the end"}, true},
		{"data section past EOF", hdr(3, 1, 0).tensor("t", quant.F32, 0, 8).zeros(4).b, []string{"data section starts at 64, past the end of the 61-byte file"}, true},
		{"overlap", hdr(3, 2, 0).tensor("a", quant.F32, 0, 16).tensor("b", quant.F32, 32, 16).pad(32).zeros(96).b,
			[]string{`tensor "b" (data [32, 96)) overlaps tensor "a" (data [0, 64))`}, false},
		{"same offset", hdr(3, 2, 0).tensor("a", quant.F32, 32, 8).tensor("b", quant.F32, 32, 8).pad(32).zeros(96).b, []string{"overlaps tensor"}, false},
		{"overlap out of order", hdr(3, 3, 0).tensor("c", quant.F32, 128, 8).tensor("b", quant.F32, 64, 24).tensor("a", quant.F32, 0, 8).pad(32).zeros(192).b,
			[]string{`tensor "c" (data [128, 160)) overlaps tensor "b" (data [64, 160))`}, false},
	}
}

func TestHostile(t *testing.T) {
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("hostile.gguf", c.data)
			if f != nil {
				t.Errorf("Parse returned a file with its error")
			}
			wantErr(t, err, "hostile.gguf", c.want...)
			if err != nil && errors.Is(err, ErrTruncated) != c.truncated {
				t.Errorf("errors.Is(ErrTruncated) = %v, want %v", !c.truncated, c.truncated)
			}
		})
	}
}

// TestValidEdgeCases are unusual files that are nevertheless right.
func TestValidEdgeCases(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"header only", hdr(3, 0, 0).b},
		{"v2 header only", hdr(2, 0, 0).b},
		// no tensors: the data section (and its padding) may be absent
		{"no tensors, huge alignment", hdr(3, 0, 1).kv("general.alignment", TypeUint32).u32(1 << 31).b},
		// an empty tensor lies inside another's bytes without overlapping them
		{"empty tensor inside another", hdr(3, 2, 0).tensor("a", quant.F32, 0, 16).tensor("e", quant.F32, 32, 0, 5).pad(32).zeros(64).b},
		{"empty tensors at one offset", hdr(3, 2, 0).tensor("a", quant.F32, 0, 0).tensor("b", quant.Q4_K, 0, 256, 0).pad(32).b},
		// llama.cpp lays tensors out in order, but the format does not require it
		{"tensors out of order", hdr(3, 2, 0).tensor("b", quant.F32, 32, 8).tensor("a", quant.F32, 0, 8).pad(32).zeros(64).b},
		{"trailing bytes", hdr(3, 1, 0).tensor("t", quant.F32, 0, 8).pad(32).zeros(1000).b},
		{"empty key and name", hdr(3, 1, 1).kv("", TypeUint8).u8(1).tensor("", quant.F32, 0, 1).pad(32).zeros(4).b},
		{"max rank", hdr(3, 1, 0).tensor("t", quant.Q4_0, 0, 32, 1, 1, 2).pad(32).zeros(36).b},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("edge.gguf", c.data)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f.Tensors {
				if got := f.TensorData(&f.Tensors[i]); int64(len(got)) != f.Tensors[i].Size {
					t.Errorf("tensor %q: %d bytes, want %d", f.Tensors[i].Name, len(got), f.Tensors[i].Size)
				}
			}
		})
	}
}

// TestTruncation cuts a valid file at every byte: each prefix must fail
// cleanly, naming the file; the cuts inside the data section are truncation.
func TestTruncation(t *testing.T) {
	for _, data := range [][]byte{tinyFile(t, 3, 32), tinyFile(t, 2, 64)} {
		full, err := Parse("full.gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(data) {
			cut := data[:n:n] // no spare capacity for a read past the end to hide in
			f, err := Parse("cut.gguf", cut)
			if err == nil {
				t.Fatalf("prefix of %d of %d bytes parsed: %d tensors", n, len(data), len(f.Tensors))
			}
			if !strings.HasPrefix(err.Error(), "cut.gguf: ") {
				t.Fatalf("prefix %d: error %q does not name the file", n, err)
			}
			if int64(n) >= full.DataOffset && !errors.Is(err, ErrTruncated) {
				t.Fatalf("prefix %d (data section at %d): %v is not ErrTruncated", n, full.DataOffset, err)
			}
		}
	}
}

// allocPerParse is the average number of bytes one Parse of data allocates.
func allocPerParse(data []byte) float64 {
	const runs = 20
	Parse("warm.gguf", data)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		Parse("hostile.gguf", data)
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / runs
}

// TestHostileAllocation: a small file claiming absurd or maximal counts must
// not make the parser allocate much more than the file's own size.
func TestHostileAllocation(t *testing.T) {
	const size = 1024
	// files of exactly size bytes that claim the most the bytes allow
	fill := func(r *raw) []byte { return r.zeros(size - len(r.b)).b }
	// an array of elem claiming as many elements as the rest of the file holds
	maxArray := func(elem ValueType) []byte {
		r := hdr(3, 0, 1).kv("a", TypeArray).u32(uint32(elem))
		return fill(r.u64(uint64(size-len(r.b)-8) / uint64(elem.minSize())))
	}
	// as many entries as fit, the count set to match
	entries := func(nTensors bool, add func(r *raw, i int)) []byte {
		body := &raw{}
		n := 0
		for {
			next := &raw{b: append([]byte(nil), body.b...)}
			add(next, n)
			if 24+len(next.b) > size {
				break
			}
			body, n = next, n+1
		}
		if nTensors {
			return fill(&raw{b: append(hdr(3, uint64(n), 0).b, body.b...)})
		}
		return fill(&raw{b: append(hdr(3, 0, uint64(n)).b, body.b...)})
	}
	name := func(i int) string { return string(rune('A'+i%50)) + string(rune('A'+i/50)) }
	cases := map[string][]byte{
		"max tensor count":   fill(hdr(3, (size-24)/minTensorInfo, 0)),
		"max kv count":       fill(hdr(3, 0, (size-24)/minKV)),
		"many keys":          entries(false, func(r *raw, i int) { r.kv(name(i), TypeUint32).u32(uint32(i) << 20) }),
		"many string keys":   entries(false, func(r *raw, i int) { r.kv(name(i), TypeString).str("") }),
		"many tensors":       entries(true, func(r *raw, i int) { r.tensor(name(i), quant.F32, 0, 0) }),
		"max string array":   maxArray(TypeString),
		"max array of array": maxArray(TypeArray),
		"max bool array":     maxArray(TypeBool),
		"max i8 array":       maxArray(TypeInt8),
	}
	for name, data := range cases {
		if len(data) != size {
			t.Fatalf("%s: test file is %d bytes, want %d", name, len(data), size)
		}
	}
	for _, c := range hostileCases() {
		if len(c.data) > 0 {
			cases[c.name] = c.data
		}
	}
	for name, data := range cases {
		got := allocPerParse(data)
		// The bound: 8 bytes per file byte (a Value, a map slot, a boxed
		// scalar per few bytes of input) plus a fixed 2 KB for the File and
		// the error message.
		t.Logf("%-40s %5d bytes, %6.0f allocated (%.1fx)", name, len(data), got, got/float64(len(data)))
		if limit := 8*float64(len(data)) + 2048; got > limit {
			t.Errorf("%s: parsing %d bytes allocated %.0f bytes, limit %.0f", name, len(data), got, limit)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("valid", func(t *testing.T) {
		data := tinyFile(t, 3, 32)
		f, err := Open(write("ok.gguf", data))
		if err != nil {
			t.Fatal(err)
		}
		ti, ok := f.Tensor("t.q8")
		if !ok || string(f.TensorData(ti)) != string(pattern(1, 544)) {
			t.Errorf("tensor data wrong through the mapping")
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		if err := f.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		p := write("empty.gguf", nil)
		_, err := Open(p)
		wantErr(t, err, p, "not a GGUF file: the file is empty")
	})
	t.Run("truncated", func(t *testing.T) {
		data := tinyFile(t, 3, 32)
		p := write("cut.gguf", data[:len(data)-1])
		_, err := Open(p)
		wantErr(t, err, p, `tensor "t.f16"`, "runs past the end of the file")
	})
	t.Run("hostile", func(t *testing.T) {
		p := write("hostile.gguf", hdr(3, huge, 0).b)
		_, err := Open(p)
		wantErr(t, err, p, "tensor count")
	})
	t.Run("missing", func(t *testing.T) {
		p := filepath.Join(dir, "nope.gguf")
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v does not name %s as missing", err, p)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_, err := Open(dir)
		wantErr(t, err, dir, "not a regular file")
	})
}
