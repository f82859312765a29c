package gguf

import (
	"bytes"
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzParse feeds the reader arbitrary bytes. It must never panic or
// allocate beyond what the input justifies; an error must name the file; and
// a file it accepts must be self-consistent and survive a round trip through
// the Writer. Crashers found are kept in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	// (a) the golden models' headers and tensor directories plus a little
	// data: the whole files (1-23 MB) would make each execution slow, so these
	// seeds fail with "runs past the end", and the mutator finds the rest.
	for _, path := range goldenModels(f) {
		g, err := Open(path)
		if err != nil {
			f.Fatalf("golden seed: %v", err)
		}
		f.Add(bytes.Clone(g.data[:g.DataOffset+256]))
		f.Add(trimmed(f, g))
		g.Close()
	}
	// (b) complete valid files, so that the success path is fuzzed too
	f.Add(tinyFile(f, 3, 32))
	f.Add(tinyFile(f, 2, 64))
	f.Add(buildFile(f, 3, valueCases[:12], nil))
	// (c) one hand-made defect each
	for _, c := range hostileCases() {
		f.Add(c.data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse("fuzz.gguf", data)
		if err != nil {
			if g != nil {
				t.Fatalf("Parse returned a file along with %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.gguf: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		checkFile(t, g, data)
	})
}

// checkFile asserts everything a successful Parse promises.
func checkFile(t *testing.T, g *File, data []byte) {
	if g.Version != 2 && g.Version != 3 {
		t.Fatalf("accepted version %d", g.Version)
	}
	if a := g.Alignment; a == 0 || a&(a-1) != 0 || g.DataOffset%int64(a) != 0 || g.DataOffset < 24 {
		t.Fatalf("alignment %d, data offset %d", a, g.DataOffset)
	}
	for i, kv := range g.KV {
		if v, ok := g.Get(kv.Key); !ok || !v.Equal(kv.Value) || g.keys[kv.Key] != i {
			t.Fatalf("Get(%q) disagrees with KV[%d]", kv.Key, i)
		}
		if err := checkValue(kv.Value, 0); err != nil {
			t.Fatalf("metadata %q: parsed value is malformed: %v", kv.Key, err)
		}
	}
	if len(g.keys) != len(g.KV) || len(g.tensors) != len(g.Tensors) {
		t.Fatalf("lookup maps hold %d keys, %d tensors for %d, %d", len(g.keys), len(g.tensors), len(g.KV), len(g.Tensors))
	}
	var used []int // non-empty tensors
	for i := range g.Tensors {
		ti := &g.Tensors[i]
		if p, ok := g.Tensor(ti.Name); !ok || p != ti {
			t.Fatalf("Tensor(%q) is not tensor #%d", ti.Name, i)
		}
		if len(ti.Dims) < 1 || len(ti.Dims) > MaxDims || !ti.Type.Known() || ti.Dims[0]%uint64(ti.Type.BlockSize()) != 0 {
			t.Fatalf("tensor %q: dims %v type %v accepted", ti.Name, ti.Dims, ti.Type)
		}
		if size, err := ti.Type.RowBytes(ti.Elements()); err != nil || size != ti.Size || ti.Elements() < 0 {
			t.Fatalf("tensor %q: size %d, elements %d, RowBytes %d %v", ti.Name, ti.Size, ti.Elements(), size, err)
		}
		if ti.Offset%g.Alignment != 0 {
			t.Fatalf("tensor %q: offset %d not aligned", ti.Name, ti.Offset)
		}
		start := g.DataOffset + int64(ti.Offset)
		if ti.Offset > uint64(len(data)) || start+ti.Size > int64(len(data)) {
			t.Fatalf("tensor %q: data [%d, +%d) lies outside the %d-byte input", ti.Name, start, ti.Size, len(data))
		}
		td := g.TensorData(ti)
		if int64(len(td)) != ti.Size || int64(cap(td)) != ti.Size {
			t.Fatalf("tensor %q: TensorData has len %d cap %d, want %d", ti.Name, len(td), cap(td), ti.Size)
		}
		if ti.Size > 0 {
			if &td[0] != &data[start] {
				t.Fatalf("tensor %q: TensorData is not a view of the input at %d", ti.Name, start)
			}
			used = append(used, i)
		}
	}
	slices.SortFunc(used, func(a, b int) int { return cmp.Compare(g.Tensors[a].Offset, g.Tensors[b].Offset) })
	for k := 1; k < len(used); k++ {
		p, q := &g.Tensors[used[k-1]], &g.Tensors[used[k]]
		if p.Offset+uint64(p.Size) > q.Offset {
			t.Fatalf("tensors %q and %q overlap", p.Name, q.Name)
		}
	}

	// Round trip, unless the Writer's padding would blow a tiny input up to
	// megabytes (an alignment of 2^31 is legal).
	if g.Alignment*uint64(len(g.Tensors)+1) > 1<<20 {
		return
	}
	out, err := reencode(g)
	if err != nil {
		t.Fatalf("the Writer refuses what the reader accepted: %v", err)
	}
	h, err := Parse("reencoded.gguf", out)
	if err != nil {
		t.Fatalf("re-encoded file does not parse: %v", err)
	}
	if d := sameContent(g, h); d != "" {
		t.Fatalf("round trip changed the content: %s", d)
	}
	again, err := reencode(h)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("second re-encoding differs (err %v)", err)
	}
}

// trimmed is g's header with every array cut to its first three elements,
// followed by 256 bytes of data: the same structure as the golden prefix in a
// few kilobytes, which the fuzzer mutates and minimizes far faster.
func trimmed(tb testing.TB, g *File) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, kv := range g.KV {
		v := kv.Value
		if v.Type() == TypeArray && v.Len() > 3 {
			v.v = reflect.ValueOf(v.v).Slice(0, 3).Interface()
		}
		if err := w.SetKV(kv.Key, v); err != nil {
			tb.Fatal(err)
		}
	}
	for _, t := range g.Tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Dims...); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		tb.Fatal(err)
	}
	if err := w.w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return append(buf.Bytes(), g.data[g.DataOffset:g.DataOffset+256]...)
}
