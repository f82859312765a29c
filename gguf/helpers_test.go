package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// goldenRoot is shared/golden seen from this package's directory.
const goldenRoot = "../../shared/golden"

// goldenModels lists the golden model files, failing the test when the shared
// directory is missing: a silent skip would pass CI without testing anything.
func goldenModels(tb testing.TB) []string {
	tb.Helper()
	dir := filepath.Join(goldenRoot, "models")
	if _, err := os.Stat(dir); err != nil {
		tb.Fatalf("golden models missing: %v (shared/ must be checked out next to the repository)", err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no *.gguf in %s (err %v)", dir, err)
	}
	return paths
}

// raw builds GGUF bytes field by field, for files the Writer refuses to make.
type raw struct{ b []byte }

func (r *raw) u8(x uint8) *raw   { r.b = append(r.b, x); return r }
func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }

// kv starts a metadata entry; the caller appends the value.
func (r *raw) kv(key string, t ValueType) *raw { return r.str(key).u32(uint32(t)) }

func (r *raw) tensor(name string, typ quant.Type, off uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// pad appends zeros up to a multiple of align.
func (r *raw) pad(align int) *raw {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	return r
}

func (r *raw) zeros(n int) *raw { r.b = append(r.b, make([]byte, n)...); return r }

// hdr starts a file: magic, version and the two counts.
func hdr(version uint32, nTensors, nKV uint64) *raw {
	return (&raw{}).u32(Magic).u32(version).u64(nTensors).u64(nKV)
}

// pattern is deterministic tensor data that differs between tensors.
func pattern(seed, n int) []byte {
	p := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

// tensorSpec declares a tensor for buildFile.
type tensorSpec struct {
	name string
	typ  quant.Type
	dims []uint64
}

// buildFile writes kvs and tensors (data from pattern) with the Writer,
// feeding the data in chunks of the given sizes, cycled.
func buildFile(tb testing.TB, version uint32, kvs []KV, tensors []tensorSpec, chunks ...int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Version = version
	for _, kv := range kvs {
		if err := w.SetKV(kv.Key, kv.Value); err != nil {
			tb.Fatal(err)
		}
	}
	var all []byte
	for i, t := range tensors {
		if err := w.AddTensor(t.name, t.typ, t.dims...); err != nil {
			tb.Fatal(err)
		}
		all = append(all, pattern(i, int(w.Tensors()[i].Size))...)
	}
	if err := w.WriteHeader(); err != nil {
		tb.Fatal(err)
	}
	if len(chunks) == 0 {
		chunks = []int{len(all) + 1}
	}
	for k := 0; len(all) > 0; k++ {
		c := min(chunks[k%len(chunks)], len(all))
		if n, err := w.Write(all[:c]); err != nil || n != c {
			tb.Fatalf("Write(%d bytes) = %d, %v", c, n, err)
		}
		all = all[c:]
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// tinyFile is a small complete file with a bit of everything: the success
// path's seed for the fuzzer and the subject of the truncation test. Every
// tensor's size is a multiple of the alignment, so the file has no trailing
// padding and each of its proper prefixes is a broken file.
func tinyFile(tb testing.TB, version uint32, align uint32) []byte {
	kvs := []KV{
		{"general.architecture", String("deepseek2")},
		{"general.alignment", Uint32(align)},
		{"a.u8", Uint8(7)},
		{"a.i16", Int16(-300)},
		{"a.f32", Float32(1.5)},
		{"a.bool", Bool(true)},
		{"a.u64", Uint64(1 << 40)},
		{"a.f64", Float64(-2.25)},
		{"a.tokens", Strings([]string{"<s>", "", "héllo"})},
		{"a.types", Int32s([]int32{1, 3, 4})},
		{"a.nested", Arrays([]Value{Strings([]string{"x"}), Uint8s(nil), Arrays([]Value{Bools([]bool{true, false})})})},
	}
	tensors := []tensorSpec{
		{"t.f32", quant.F32, []uint64{8, 2}},   // 64 bytes
		{"t.q8", quant.Q8_0, []uint64{32, 16}}, // 544 bytes = 17*32
		{"t.f16", quant.F16, []uint64{64}},     // 128 bytes
	}
	return buildFile(tb, version, kvs, tensors, 5)
}

// reencode writes f back out unchanged (Rewrite).
func reencode(f *File) ([]byte, error) {
	var buf bytes.Buffer
	err := Rewrite(&buf, f, nil)
	return buf.Bytes(), err
}

// sameContent reports how a and b differ in metadata, tensor directory
// (offsets aside) and tensor bytes; "" when they do not.
func sameContent(a, b *File) string {
	if a.Version != b.Version || a.Alignment != b.Alignment {
		return fmt.Sprintf("version/alignment %d/%d vs %d/%d", a.Version, a.Alignment, b.Version, b.Alignment)
	}
	if len(a.KV) != len(b.KV) || len(a.Tensors) != len(b.Tensors) {
		return fmt.Sprintf("%d kv, %d tensors vs %d kv, %d tensors", len(a.KV), len(a.Tensors), len(b.KV), len(b.Tensors))
	}
	for i := range a.KV {
		if a.KV[i].Key != b.KV[i].Key || !a.KV[i].Value.Equal(b.KV[i].Value) {
			return fmt.Sprintf("kv #%d: %q=%s vs %q=%s", i, a.KV[i].Key, a.KV[i].Value.Format(), b.KV[i].Key, b.KV[i].Value.Format())
		}
	}
	for i := range a.Tensors {
		s, t := &a.Tensors[i], &b.Tensors[i]
		if s.Name != t.Name || s.Type != t.Type || s.Size != t.Size || !slices.Equal(s.Dims, t.Dims) {
			return fmt.Sprintf("tensor #%d: %+v vs %+v", i, *s, *t)
		}
		if !bytes.Equal(a.TensorData(s), b.TensorData(t)) {
			return fmt.Sprintf("tensor %q: data differ", s.Name)
		}
	}
	return ""
}

// wantErr checks that err names the file and contains every substring.
func wantErr(tb testing.TB, err error, file string, subs ...string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want one containing %q", subs)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, file+": ") {
		tb.Errorf("error %q does not start with the file name %q", msg, file)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			tb.Errorf("error %q does not contain %q", msg, s)
		}
	}
}
