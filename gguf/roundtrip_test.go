package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// valueCases covers every value type, edge values, arrays of every element
// type (empty ones included), arrays of strings and arrays of arrays.
var valueCases = []KV{
	{"u8", Uint8(255)},
	{"u8.zero", Uint8(0)},
	{"i8", Int8(-128)},
	{"u16", Uint16(65535)},
	{"i16", Int16(-32768)},
	{"u32", Uint32(math.MaxUint32)},
	{"i32", Int32(math.MinInt32)},
	{"f32", Float32(-0.0078125)},
	{"f32.inf", Float32(float32(math.Inf(-1)))},
	{"f32.nan", Float32(float32(math.NaN()))},
	{"f32.negzero", Float32(float32(math.Copysign(0, -1)))},
	{"bool.true", Bool(true)},
	{"bool.false", Bool(false)},
	{"str", String("deepseek2")},
	{"str.empty", String("")},
	{"str.odd", String("nul\x00byte, invalid utf8 \xff, 日本語")},
	{"str.long", String(strings.Repeat("ab", 5000))},
	{"u64", Uint64(math.MaxUint64)},
	{"i64", Int64(math.MinInt64)},
	{"f64", Float64(math.MaxFloat64)},
	{"f64.nan", Float64(math.NaN())},

	{"arr.u8", Uint8s([]uint8{0, 1, 255})},
	{"arr.i8", Int8s([]int8{-128, 0, 127})},
	{"arr.u16", Uint16s([]uint16{0, 65535})},
	{"arr.i16", Int16s([]int16{-32768, 32767})},
	{"arr.u32", Uint32s([]uint32{0, math.MaxUint32})},
	{"arr.i32", Int32s([]int32{1, 3, 4, -1})},
	{"arr.f32", Float32s([]float32{0.5, -1e30, float32(math.Inf(1))})},
	{"arr.bool", Bools([]bool{true, false, true})},
	{"arr.str", Strings([]string{"<s>", "", "Ġthe", "\x00"})},
	{"arr.u64", Uint64s([]uint64{math.MaxUint64, 0})},
	{"arr.i64", Int64s([]int64{math.MinInt64, math.MaxInt64})},
	{"arr.f64", Float64s([]float64{math.Pi, math.SmallestNonzeroFloat64})},

	{"empty.u8", Uint8s(nil)},
	{"empty.i8", Int8s([]int8{})},
	{"empty.u16", Uint16s(nil)},
	{"empty.i16", Int16s(nil)},
	{"empty.u32", Uint32s(nil)},
	{"empty.i32", Int32s(nil)},
	{"empty.f32", Float32s(nil)},
	{"empty.bool", Bools(nil)},
	{"empty.str", Strings(nil)},
	{"empty.u64", Uint64s(nil)},
	{"empty.i64", Int64s(nil)},
	{"empty.f64", Float64s(nil)},
	{"empty.arr", Arrays(nil)},

	{"arr.arr.str", Arrays([]Value{Strings([]string{"a", "bb"}), Strings(nil), Strings([]string{"ccc"})})},
	{"arr.arr.mixed", Arrays([]Value{Int32s([]int32{1}), Float64s([]float64{2}), Bools(nil), Arrays([]Value{Strings([]string{"deep"})})})},
	{"arr.arr.empty", Arrays([]Value{Arrays(nil), Uint8s(nil)})},
	{"arr.deepest", deepArray(maxNesting)},
}

// deepArray is n arrays nested inside each other around a string array.
func deepArray(n int) Value {
	v := Strings([]string{"core"})
	for i := 1; i < n; i++ {
		v = Arrays([]Value{v})
	}
	return v
}

func TestRoundTripValues(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		data := buildFile(t, version, valueCases, nil)
		f, err := Parse("values.gguf", data)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if f.Version != version {
			t.Errorf("version %d, want %d", f.Version, version)
		}
		if len(f.KV) != len(valueCases) {
			t.Fatalf("v%d: %d entries, want %d", version, len(f.KV), len(valueCases))
		}
		for i, want := range valueCases {
			got := f.KV[i]
			if got.Key != want.Key {
				t.Errorf("entry #%d is %q, want %q (order must be kept)", i, got.Key, want.Key)
				continue
			}
			v, ok := f.Get(want.Key)
			if !ok || !v.Equal(got.Value) {
				t.Errorf("Get(%q) disagrees with KV[%d]", want.Key, i)
			}
			if got.Value.Type() != want.Value.Type() || got.Value.ElemType() != want.Value.ElemType() {
				t.Errorf("%s: type %s/%s, want %s/%s", want.Key, got.Value.Type(), got.Value.ElemType(), want.Value.Type(), want.Value.ElemType())
			}
			if !got.Value.Equal(want.Value) {
				t.Errorf("%s: got %s, want %s", want.Key, got.Value.Format(), want.Value.Format())
			}
			if got.Value.Len() != want.Value.Len() {
				t.Errorf("%s: Len %d, want %d", want.Key, got.Value.Len(), want.Value.Len())
			}
			// The decoded Go value has the constructor's Go type, and (NaNs
			// and nil-versus-empty aside, which nested arrays hold) the same
			// contents.
			gi, wi := got.Value.Interface(), want.Value.Interface()
			if reflect.TypeOf(gi) != reflect.TypeOf(wi) {
				t.Errorf("%s: Go type %T, want %T", want.Key, gi, wi)
			}
			if !strings.Contains(want.Key, "nan") && want.Value.Len() > 0 && want.Value.ElemType() != TypeArray && !reflect.DeepEqual(gi, wi) {
				t.Errorf("%s: %#v, want %#v", want.Key, gi, wi)
			}
		}
	}
}

func TestValueAccessors(t *testing.T) {
	f, err := Parse("values.gguf", buildFile(t, 3, valueCases, nil))
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) Value {
		v, ok := f.Get(k)
		if !ok {
			t.Fatalf("missing %q", k)
		}
		return v
	}
	if u, ok := get("u64").Uint(); !ok || u != math.MaxUint64 {
		t.Errorf("Uint(u64) = %d, %v", u, ok)
	}
	if _, ok := get("u64").Int(); ok {
		t.Errorf("Int(MaxUint64) should not fit")
	}
	if i, ok := get("i8").Int(); !ok || i != -128 {
		t.Errorf("Int(i8) = %d, %v", i, ok)
	}
	if _, ok := get("i8").Uint(); ok {
		t.Errorf("Uint(-128) should fail")
	}
	if x, ok := get("f32").Float(); !ok || x != -0.0078125 {
		t.Errorf("Float(f32) = %v, %v", x, ok)
	}
	if b, ok := get("bool.true").Bool(); !ok || !b {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	if s, ok := get("arr.str").StringArray(); !ok || len(s) != 4 || s[2] != "Ġthe" {
		t.Errorf("StringArray = %q, %v", s, ok)
	}
	if a, ok := get("arr.u16").IntArray(); !ok || !reflect.DeepEqual(a, []int64{0, 65535}) {
		t.Errorf("IntArray(u16) = %v, %v", a, ok)
	}
	if _, ok := get("arr.u64").IntArray(); ok {
		t.Errorf("IntArray of MaxUint64 should fail")
	}
	if _, ok := get("arr.f32").IntArray(); ok {
		t.Errorf("IntArray of floats should fail")
	}
	if a, ok := get("arr.arr.str").Interface().([]Value); !ok || len(a) != 3 {
		t.Errorf("array of arrays holds %T", get("arr.arr.str").Interface())
	} else if s, _ := a[2].StringArray(); len(s) != 1 || s[0] != "ccc" {
		t.Errorf("inner array = %q", s)
	}
	for _, k := range []string{"str", "arr.str", "arr.arr.str", "empty.u8", "u8"} {
		if get(k).Format() == "" {
			t.Errorf("Format(%s) is empty", k)
		}
	}
}

// TestRoundTripTensors writes tensors of several types, odd block sizes
// among them, with data fed in awkward chunks, and checks every offset,
// byte and padding byte of the result.
func TestRoundTripTensors(t *testing.T) {
	specs := []tensorSpec{
		{"mxfp4", quant.MXFP4, []uint64{32, 3}},      // 51 bytes: odd size, padding follows
		{"f32", quant.F32, []uint64{5, 3}},           // 60 bytes
		{"empty", quant.F32, []uint64{4, 0}},         // no bytes at all
		{"q4_0", quant.Q4_0, []uint64{64, 2, 1}},     // 72 bytes
		{"q8_0", quant.Q8_0, []uint64{32}},           // 34 bytes
		{"q4_k", quant.Q4_K, []uint64{256, 2}},       // 288 bytes
		{"q6_k", quant.Q6_K, []uint64{512, 1, 1, 1}}, // 420 bytes
		{"f16", quant.F16, []uint64{3}},              // 6 bytes
		{"iq4_xs", quant.IQ4_XS, []uint64{256}},      // 136 bytes
	}
	chunkings := [][]int{{1}, {3, 7, 13}, {1000}, {50, 1, 2}}
	for _, version := range []uint32{2, 3} {
		for _, align := range []uint32{0, 1, 8, 64, 4096} {
			for _, chunks := range chunkings {
				var kvs []KV
				wantAlign := uint64(DefaultAlignment)
				if align != 0 {
					kvs = append(kvs, KV{"general.alignment", Uint32(align)})
					wantAlign = uint64(align)
				}
				kvs = append(kvs, KV{"general.name", String("tensors")})
				data := buildFile(t, version, kvs, specs, chunks...)
				f, err := Parse("tensors.gguf", data)
				if err != nil {
					t.Fatalf("v%d align %d chunks %v: %v", version, align, chunks, err)
				}
				checkTensors(t, f, data, specs, wantAlign)
			}
		}
	}
}

func checkTensors(t *testing.T, f *File, data []byte, specs []tensorSpec, align uint64) {
	t.Helper()
	if f.Alignment != align {
		t.Fatalf("alignment %d, want %d", f.Alignment, align)
	}
	if f.DataOffset%int64(align) != 0 {
		t.Errorf("data section at %d is not aligned to %d", f.DataOffset, align)
	}
	if len(f.Tensors) != len(specs) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(specs))
	}
	var next uint64 // where the Writer puts the next tensor
	for i, s := range specs {
		ti, ok := f.Tensor(s.name)
		if !ok || ti != &f.Tensors[i] {
			t.Fatalf("Tensor(%q) not found at index %d", s.name, i)
		}
		want, _ := s.typ.RowBytes(ti.Elements())
		if ti.Type != s.typ || ti.Size != want || !reflect.DeepEqual(ti.Dims, s.dims) {
			t.Errorf("%s: %v %v size %d, want %v %v size %d", s.name, ti.Type, ti.Dims, ti.Size, s.typ, s.dims, want)
		}
		if ti.Offset != next {
			t.Errorf("%s: offset %d, want %d", s.name, ti.Offset, next)
		}
		if ti.Offset%align != 0 {
			t.Errorf("%s: offset %d not aligned to %d", s.name, ti.Offset, align)
		}
		got := f.TensorData(ti)
		if int64(len(got)) != ti.Size || !bytes.Equal(got, pattern(i, int(ti.Size))) {
			t.Errorf("%s: data differ", s.name)
		}
		if ti.Size > 0 && &got[0] != &data[f.DataOffset+int64(ti.Offset)] {
			t.Errorf("%s: TensorData is a copy, not a view of the file", s.name)
		}
		end := ti.Offset + uint64(ti.Size)
		next = (end + align - 1) / align * align
		for _, b := range data[f.DataOffset+int64(end) : f.DataOffset+int64(next)] {
			if b != 0 {
				t.Fatalf("%s: padding after the data is not zero", s.name)
			}
		}
	}
	if int64(len(data)) != f.DataOffset+int64(next) {
		t.Errorf("file is %d bytes, want %d", len(data), f.DataOffset+int64(next))
	}
}

// TestRoundTripIdempotent re-encodes parsed files: writing what was read
// gives a file with the same content, and the same bytes the second time.
func TestRoundTripIdempotent(t *testing.T) {
	for _, data := range [][]byte{tinyFile(t, 2, 32), tinyFile(t, 3, 64), buildFile(t, 3, valueCases, nil)} {
		f, err := Parse("a.gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := reencode(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Errorf("re-encoding a Writer's file changed its bytes")
		}
		g, err := Parse("b.gguf", again)
		if err != nil {
			t.Fatal(err)
		}
		if d := sameContent(f, g); d != "" {
			t.Error(d)
		}
	}
}

// Rewrite replaces the values of keys the file has, in place, adds the
// others after them in key order, and keeps every tensor's bytes.
func TestRewriteSets(t *testing.T) {
	f, err := Parse("a.gguf", tinyFile(t, 3, 32))
	if err != nil {
		t.Fatal(err)
	}
	key := f.KV[len(f.KV)-1].Key
	var buf bytes.Buffer
	if err := Rewrite(&buf, f, map[string]Value{key: String("new"), "z.b": Uint32(2), "z.a": Uint32(1)}); err != nil {
		t.Fatal(err)
	}
	g, err := Parse("b.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.KV) != len(f.KV)+2 {
		t.Fatalf("%d keys, want %d", len(g.KV), len(f.KV)+2)
	}
	for i, kv := range f.KV[:len(f.KV)-1] {
		if g.KV[i].Key != kv.Key || !g.KV[i].Value.Equal(kv.Value) {
			t.Errorf("key #%d: %q=%s, want %q=%s", i, g.KV[i].Key, g.KV[i].Value.Format(), kv.Key, kv.Value.Format())
		}
	}
	n := len(f.KV)
	for i, want := range []KV{{key, String("new")}, {"z.a", Uint32(1)}, {"z.b", Uint32(2)}} {
		if got := g.KV[n-1+i]; got.Key != want.Key || !got.Value.Equal(want.Value) {
			t.Errorf("key #%d: %q=%s, want %q=%s", n-1+i, got.Key, got.Value.Format(), want.Key, want.Value.Format())
		}
	}
	for i := range f.Tensors {
		if !bytes.Equal(f.TensorData(&f.Tensors[i]), g.TensorData(&g.Tensors[i])) {
			t.Errorf("tensor %q: data differ", f.Tensors[i].Name)
		}
	}
}

// RewriteTensors writes the tensors its function converts in their new type
// (here the Q8_0 one as float32), the others and the metadata as they were,
// and names a tensor whose conversion failed.
func TestRewriteTensors(t *testing.T) {
	f, err := Parse("a.gguf", tinyFile(t, 3, 32))
	if err != nil {
		t.Fatal(err)
	}
	toF32 := func(ti *TensorInfo, data []byte) (quant.Type, []byte, bool, error) {
		if ti.Type != quant.Q8_0 {
			return 0, nil, false, nil
		}
		vals := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, data, vals); err != nil {
			return 0, nil, false, err
		}
		out := make([]byte, 0, 4*len(vals))
		for _, v := range vals {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
		return quant.F32, out, true, nil
	}
	var buf bytes.Buffer
	if err := RewriteTensors(&buf, f, nil, toF32); err != nil {
		t.Fatal(err)
	}
	g, err := Parse("b.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.KV) != len(f.KV) || len(g.Tensors) != len(f.Tensors) {
		t.Fatalf("%d keys and %d tensors, want %d and %d", len(g.KV), len(g.Tensors), len(f.KV), len(f.Tensors))
	}
	for i := range f.Tensors {
		ft, gt := &f.Tensors[i], &g.Tensors[i]
		want, _, converted, _ := toF32(ft, f.TensorData(ft))
		if !converted {
			want = ft.Type
		}
		if gt.Type != want || !slices.Equal(gt.Dims, ft.Dims) {
			t.Errorf("tensor %q: %s %v, want %s %v", gt.Name, gt.Type, gt.Dims, want, ft.Dims)
		}
		a, b := make([]float32, ft.Elements()), make([]float32, gt.Elements())
		if quant.Dequantize(ft.Type, f.TensorData(ft), a) != nil || quant.Dequantize(gt.Type, g.TensorData(gt), b) != nil ||
			!slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) { // the file's random bytes hold NaNs
			t.Errorf("tensor %q: values differ", gt.Name)
		}
	}
	failing := func(ti *TensorInfo, data []byte) (quant.Type, []byte, bool, error) {
		return 0, nil, false, errors.New("no")
	}
	if err := RewriteTensors(&buf, f, nil, failing); err == nil || !strings.Contains(err.Error(), "tensor t.") {
		t.Errorf("a failing conversion: %v", err)
	}
}

func TestWriterErrors(t *testing.T) {
	type step func(w *Writer) error
	cases := []struct {
		name string
		do   step
		want string
	}{
		{"duplicate key", func(w *Writer) error { w.SetKV("k", Uint8(1)); return w.SetKV("k", Uint8(2)) }, `"k" set twice`},
		{"alignment type", func(w *Writer) error { return w.SetKV("general.alignment", Uint64(32)) }, "power of two"},
		{"alignment value", func(w *Writer) error { return w.SetKV("general.alignment", Uint32(48)) }, "power of two"},
		{"zero value", func(w *Writer) error { return w.SetKV("z", Value{}) }, "Go type <nil>"},
		{"mistagged value", func(w *Writer) error { return w.SetKV("m", Value{typ: TypeUint32, v: "x"}) }, "tagged uint32"},
		{"scalar in array of arrays", func(w *Writer) error { return w.SetKV("s", Arrays([]Value{Uint8(1)})) }, "element #0 of an array of arrays is a uint8"},
		{"too deep", func(w *Writer) error { return w.SetKV("d", deepArray(maxNesting+1)) }, "nested more than 8 deep"},
		{"duplicate tensor", func(w *Writer) error { w.AddTensor("t", quant.F32, 1); return w.AddTensor("t", quant.F32, 1) }, `"t" declared twice`},
		{"rank 0", func(w *Writer) error { return w.AddTensor("t", quant.F32) }, "0 dimensions"},
		{"rank 5", func(w *Writer) error { return w.AddTensor("t", quant.F32, 1, 1, 1, 1, 1) }, "5 dimensions"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("t", quant.Type(31), 1) }, "unknown type 31"},
		{"row length", func(w *Writer) error { return w.AddTensor("t", quant.Q4_K, 128) }, "row length 128 is not a multiple of the Q4_K block size 256"},
		{"overflow", func(w *Writer) error { return w.AddTensor("t", quant.F32, 1<<32, 0, 1<<32) }, "overflow"},
		{"size overflow", func(w *Writer) error { return w.AddTensor("t", quant.F32, 1<<62) }, "overflow a size"},
		{"version", func(w *Writer) error { w.Version = 1; return w.WriteHeader() }, "version 1"},
		{"header twice", func(w *Writer) error { w.WriteHeader(); return w.WriteHeader() }, "header written twice"},
		{"kv after header", func(w *Writer) error { w.WriteHeader(); return w.SetKV("k", Uint8(1)) }, "after the header"},
		{"tensor after header", func(w *Writer) error { w.WriteHeader(); return w.AddTensor("t", quant.F32, 1) }, "after the header"},
		{"data before header", func(w *Writer) error { w.AddTensor("t", quant.F32, 1); _, err := w.Write(make([]byte, 4)); return err }, "before the header"},
		{"too much data", func(w *Writer) error {
			w.AddTensor("t", quant.F32, 1)
			w.WriteHeader()
			_, err := w.Write(make([]byte, 5))
			return err
		}, "1 bytes of tensor data beyond the last tensor"},
		{"missing data", func(w *Writer) error {
			w.AddTensor("t", quant.F32, 4)
			w.WriteHeader()
			w.Write(make([]byte, 3))
			return w.Close()
		}, `"t" is missing 13 bytes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do(NewWriter(&bytes.Buffer{}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestNumericAccessors(t *testing.T) {
	type want struct {
		u      uint64
		uok    bool
		i      int64
		iok    bool
		f      float64
		fok    bool
		intArr []int64
	}
	cases := []struct {
		v Value
		w want
	}{
		{Uint8(200), want{200, true, 200, true, 200, true, nil}},
		{Int8(-5), want{0, false, -5, true, -5, true, nil}},
		{Uint16(60000), want{60000, true, 60000, true, 60000, true, nil}},
		{Int16(7), want{7, true, 7, true, 7, true, nil}},
		{Uint32(1 << 31), want{1 << 31, true, 1 << 31, true, 1 << 31, true, nil}},
		{Int32(-1), want{0, false, -1, true, -1, true, nil}},
		{Uint64(math.MaxUint64), want{math.MaxUint64, true, 0, false, math.MaxUint64, true, nil}},
		{Int64(math.MaxInt64), want{math.MaxInt64, true, math.MaxInt64, true, math.MaxInt64, true, nil}},
		{Float32(0.25), want{0, false, 0, false, 0.25, true, nil}},
		{Float64(-3), want{0, false, 0, false, -3, true, nil}},
		{String("7"), want{0, false, 0, false, 0, false, nil}},
		{Bool(true), want{0, false, 0, false, 0, false, nil}},
		{Uint8s([]uint8{1, 2}), want{0, false, 0, false, 0, false, []int64{1, 2}}},
		{Int8s([]int8{-1}), want{0, false, 0, false, 0, false, []int64{-1}}},
		{Int16s([]int16{-2}), want{0, false, 0, false, 0, false, []int64{-2}}},
		{Uint32s([]uint32{3}), want{0, false, 0, false, 0, false, []int64{3}}},
		{Int32s([]int32{-4}), want{0, false, 0, false, 0, false, []int64{-4}}},
		{Int64s([]int64{math.MinInt64}), want{0, false, 0, false, 0, false, []int64{math.MinInt64}}},
		{Uint64s([]uint64{5}), want{0, false, 0, false, 0, false, []int64{5}}},
	}
	for _, c := range cases {
		u, uok := c.v.Uint()
		i, iok := c.v.Int()
		f, fok := c.v.Float()
		a, aok := c.v.IntArray()
		if u != c.w.u || uok != c.w.uok || i != c.w.i || iok != c.w.iok || f != c.w.f || fok != c.w.fok {
			t.Errorf("%s %s: Uint %d %v, Int %d %v, Float %v %v; want %+v", c.v.Type(), c.v.Format(), u, uok, i, iok, f, fok, c.w)
		}
		if aok != (c.w.intArr != nil) || !reflect.DeepEqual(a, c.w.intArr) {
			t.Errorf("%s: IntArray %v %v, want %v", c.v.Format(), a, aok, c.w.intArr)
		}
	}
	if s := ValueType(99).String(); s != "valuetype(99)" {
		t.Errorf("ValueType(99) = %q", s)
	}
	ti := TensorInfo{Dims: []uint64{4, 3}}
	if ti.Dim(0) != 4 || ti.Dim(1) != 3 || ti.Dim(2) != 1 || ti.Dim(3) != 1 || ti.Elements() != 12 {
		t.Errorf("Dim/Elements wrong for %v", ti.Dims)
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriterProgressAndFailure(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.AddTensor("a", quant.F32, 2)
	w.AddTensor("empty", quant.F32, 0)
	w.AddTensor("b", quant.F16, 4)
	w.WriteHeader()
	for _, step := range []struct {
		write int
		next  string
	}{{0, "a"}, {7, "a"}, {1, "b"}, {8, ""}} {
		if _, err := w.Write(make([]byte, step.write)); err != nil {
			t.Fatal(err)
		}
		if w.Current() != step.next {
			t.Errorf("after %d more bytes Current() = %q, want %q", step.write, w.Current(), step.next)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// A failing destination surfaces in Close (the header is buffered) or Write.
	for _, n := range []int{0, 10, 100} {
		w := NewWriter(&failWriter{n: n})
		w.SetKV("k", String(strings.Repeat("x", 50)))
		w.AddTensor("t", quant.F32, 64)
		err := w.WriteHeader()
		if err == nil {
			_, err = w.Write(make([]byte, 256))
		}
		if err == nil {
			err = w.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("writer failing after %d bytes: error %v", n, err)
		}
	}
}
