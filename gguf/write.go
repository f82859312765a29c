package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/latent-ai/latent/quant"
)

// Writer streams a GGUF file: declare metadata and tensors, write the header,
// then the tensors' bytes in declaration order, in as many pieces as suits the
// caller. Nothing is buffered beyond a small write buffer, so files larger than
// memory stream out at disk speed.
type Writer struct {
	Version   uint32 // 3 unless set before WriteHeader
	w         *bufio.Writer
	kv        []KV
	keys      map[string]bool
	tensors   []TensorInfo
	names     map[string]bool
	alignment uint64

	headerDone bool
	cur        int   // tensor being written
	curLeft    int64 // its bytes still to come
	pos        int64 // bytes written to the data section
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{Version: 3, w: bufio.NewWriterSize(w, 1<<20), keys: map[string]bool{}, names: map[string]bool{}, alignment: DefaultAlignment}
}

// SetKV adds a metadata entry. general.alignment, when given, sets the alignment.
func (w *Writer) SetKV(key string, v Value) error {
	if w.headerDone {
		return fmt.Errorf("gguf: metadata %q added after the header was written", key)
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: metadata key %q set twice", key)
	}
	if err := checkValue(v, 0); err != nil {
		return fmt.Errorf("gguf: metadata %q: %w", key, err)
	}
	if key == "general.alignment" {
		a, ok := v.v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: general.alignment must be a uint32 power of two")
		}
		w.alignment = uint64(a)
	}
	w.keys[key] = true
	w.kv = append(w.kv, KV{key, v})
	return nil
}

// AddTensor declares a tensor; dims are innermost first.
func (w *Writer) AddTensor(name string, typ quant.Type, dims ...uint64) error {
	if w.headerDone {
		return fmt.Errorf("gguf: tensor %q added after the header was written", name)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %q declared twice", name)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q has %d dimensions (must be 1 to %d)", name, len(dims), MaxDims)
	}
	if !typ.Known() {
		return fmt.Errorf("gguf: tensor %q has unknown type %d", name, uint32(typ))
	}
	n, err := elements(dims)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if dims[0]%uint64(typ.BlockSize()) != 0 {
		return fmt.Errorf("gguf: tensor %q: row length %d is not a multiple of the %s block size %d", name, dims[0], typ, typ.BlockSize())
	}
	size, err := typ.RowBytes(n)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size})
	return nil
}

// Tensors lists the declared tensors, with offsets once the header is written.
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

func (w *Writer) align(n uint64) uint64 { return (n + w.alignment - 1) / w.alignment * w.alignment }

// WriteHeader writes the magic, metadata and tensor directory, and fixes every
// tensor's offset.
func (w *Writer) WriteHeader() error {
	if w.headerDone {
		return fmt.Errorf("gguf: header written twice")
	}
	if w.Version != 2 && w.Version != 3 {
		return fmt.Errorf("gguf: cannot write version %d (only 2 and 3)", w.Version)
	}
	w.headerDone = true
	var off uint64
	for i := range w.tensors {
		w.tensors[i].Offset = off
		off = w.align(off + uint64(w.tensors[i].Size))
	}
	e := &encoder{w: w.w}
	e.u32(Magic)
	e.u32(w.Version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	if e.err != nil {
		return e.err
	}
	if err := w.pad(e.n); err != nil {
		return err
	}
	w.cur, w.curLeft = -1, 0
	w.next()
	return nil
}

// pad writes zeros up to the next alignment boundary after n bytes.
func (w *Writer) pad(n int64) error {
	var zeros [64]byte
	for k := int64(w.align(uint64(n))) - n; k > 0; {
		c := min(k, int64(len(zeros)))
		if _, err := w.w.Write(zeros[:c]); err != nil {
			return err
		}
		k -= c
	}
	return nil
}

// next moves on from a finished tensor to the next one with data to come,
// skipping empty ones.
func (w *Writer) next() {
	for w.curLeft == 0 && w.cur < len(w.tensors) {
		w.cur++
		if w.cur < len(w.tensors) {
			w.curLeft = w.tensors[w.cur].Size
		}
	}
}

// Write appends tensor data. Bytes fill the tensors in declaration order;
// alignment padding between tensors is inserted automatically.
func (w *Writer) Write(p []byte) (int, error) {
	if !w.headerDone {
		return 0, fmt.Errorf("gguf: tensor data written before the header")
	}
	written := 0
	for len(p) > 0 {
		if w.cur >= len(w.tensors) {
			return written, fmt.Errorf("gguf: %d bytes of tensor data beyond the last tensor", len(p))
		}
		c := min(int64(len(p)), w.curLeft)
		n, err := w.w.Write(p[:c])
		written += n
		w.pos += int64(n)
		w.curLeft -= int64(n)
		if err != nil {
			return written, err
		}
		p = p[c:]
		if w.curLeft == 0 {
			if err := w.pad(w.pos); err != nil {
				return written, err
			}
			w.pos = int64(w.align(uint64(w.pos)))
			w.next()
		}
	}
	return written, nil
}

// Current names the tensor whose bytes Write expects next ("" when all are written).
func (w *Writer) Current() string {
	if w.cur < len(w.tensors) {
		return w.tensors[w.cur].Name
	}
	return ""
}

// Close flushes the output and checks that every tensor's data was written.
// It does not close the underlying writer.
func (w *Writer) Close() error {
	if !w.headerDone {
		if err := w.WriteHeader(); err != nil {
			return err
		}
	}
	if w.cur < len(w.tensors) {
		return fmt.Errorf("gguf: tensor %q is missing %d bytes of data", w.tensors[w.cur].Name, w.curLeft)
	}
	return w.w.Flush()
}

// Rewrite writes f to w again with the Writer: its version, its metadata in
// order with the values in set replacing those of the same keys (keys f
// lacks follow, sorted), then its tensors and their bytes.
func Rewrite(w io.Writer, f *File, set map[string]Value) error {
	return RewriteTensors(w, f, set, nil)
}

// Convert gives a tensor RewriteTensors writes in another type: the type
// and the bytes in it (ok false: the tensor as it is).
type Convert func(t *TensorInfo, data []byte) (typ quant.Type, out []byte, ok bool, err error)

// RewriteTensors is Rewrite with the tensors that convert (when not nil)
// changes written in their new type.
func RewriteTensors(w io.Writer, f *File, set map[string]Value, convert Convert) error {
	types := make([]quant.Type, len(f.Tensors))
	data := make([][]byte, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		types[i], data[i] = t.Type, f.TensorData(t)
		if convert == nil {
			continue
		}
		typ, out, ok, err := convert(t, data[i])
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if ok {
			types[i], data[i] = typ, out
		}
	}
	gw := NewWriter(w)
	gw.Version = f.Version
	for _, kv := range f.KV {
		v, ok := set[kv.Key]
		if !ok {
			v = kv.Value
		}
		if err := gw.SetKV(kv.Key, v); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !gw.keys[k] {
			if err := gw.SetKV(k, set[k]); err != nil {
				return err
			}
		}
	}
	for i, t := range f.Tensors {
		if err := gw.AddTensor(t.Name, types[i], t.Dims...); err != nil {
			return err
		}
	}
	if err := gw.WriteHeader(); err != nil {
		return err
	}
	for _, d := range data {
		if _, err := gw.Write(d); err != nil {
			return err
		}
	}
	return gw.Close()
}

// checkValue reports why v cannot be written so that a reader accepts it: a
// type tag that disagrees with the Go value (the zero Value, say), or arrays
// nested deeper than the reader's limit.
func checkValue(v Value, depth int) error {
	typ, elem, ok := tagOf(v.v)
	if !ok {
		return fmt.Errorf("cannot encode a value of Go type %T", v.v)
	}
	if typ != v.typ || (typ == TypeArray && elem != v.elem) {
		return fmt.Errorf("value tagged %s (elements %s) holds a Go %T", v.typ, v.elem, v.v)
	}
	if typ != TypeArray {
		return nil
	}
	if depth >= maxNesting {
		return fmt.Errorf("arrays nested more than %d deep", maxNesting)
	}
	if a, ok := v.v.([]Value); ok {
		for i, e := range a {
			if e.typ != TypeArray {
				return fmt.Errorf("element #%d of an array of arrays is a %s", i, e.typ)
			}
			if err := checkValue(e, depth+1); err != nil {
				return fmt.Errorf("element #%d: %w", i, err)
			}
		}
	}
	return nil
}

// tagOf is the type tag (and element type, for arrays) of a Go value as Value holds it.
func tagOf(x any) (typ, elem ValueType, ok bool) {
	switch x.(type) {
	case uint8:
		return TypeUint8, 0, true
	case int8:
		return TypeInt8, 0, true
	case uint16:
		return TypeUint16, 0, true
	case int16:
		return TypeInt16, 0, true
	case uint32:
		return TypeUint32, 0, true
	case int32:
		return TypeInt32, 0, true
	case float32:
		return TypeFloat32, 0, true
	case bool:
		return TypeBool, 0, true
	case string:
		return TypeString, 0, true
	case uint64:
		return TypeUint64, 0, true
	case int64:
		return TypeInt64, 0, true
	case float64:
		return TypeFloat64, 0, true
	case []uint8:
		return TypeArray, TypeUint8, true
	case []int8:
		return TypeArray, TypeInt8, true
	case []uint16:
		return TypeArray, TypeUint16, true
	case []int16:
		return TypeArray, TypeInt16, true
	case []uint32:
		return TypeArray, TypeUint32, true
	case []int32:
		return TypeArray, TypeInt32, true
	case []float32:
		return TypeArray, TypeFloat32, true
	case []bool:
		return TypeArray, TypeBool, true
	case []string:
		return TypeArray, TypeString, true
	case []uint64:
		return TypeArray, TypeUint64, true
	case []int64:
		return TypeArray, TypeInt64, true
	case []float64:
		return TypeArray, TypeFloat64, true
	case []Value:
		return TypeArray, TypeArray, true
	}
	return 0, 0, false
}

// encoder writes little-endian values and remembers the first error.
type encoder struct {
	w   io.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) write(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u8(x uint8)   { e.buf[0] = x; e.write(e.buf[:1]) }
func (e *encoder) u16(x uint16) { binary.LittleEndian.PutUint16(e.buf[:], x); e.write(e.buf[:2]) }
func (e *encoder) u32(x uint32) { binary.LittleEndian.PutUint32(e.buf[:], x); e.write(e.buf[:4]) }
func (e *encoder) u64(x uint64) { binary.LittleEndian.PutUint64(e.buf[:], x); e.write(e.buf[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.write([]byte(s)) }

func (e *encoder) bool(b bool) {
	if b {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.bool(x)
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		e.array(v)
	}
}

func (e *encoder) array(v Value) {
	e.u32(uint32(v.elem))
	e.u64(uint64(v.Len()))
	switch x := v.v.(type) {
	case []uint8:
		e.write(x)
	case []int8:
		for _, y := range x {
			e.u8(uint8(y))
		}
	case []bool:
		for _, y := range x {
			e.bool(y)
		}
	case []uint16:
		for _, y := range x {
			e.u16(y)
		}
	case []int16:
		for _, y := range x {
			e.u16(uint16(y))
		}
	case []uint32:
		for _, y := range x {
			e.u32(y)
		}
	case []int32:
		for _, y := range x {
			e.u32(uint32(y))
		}
	case []float32:
		for _, y := range x {
			e.u32(math.Float32bits(y))
		}
	case []uint64:
		for _, y := range x {
			e.u64(y)
		}
	case []int64:
		for _, y := range x {
			e.u64(uint64(y))
		}
	case []float64:
		for _, y := range x {
			e.u64(math.Float64bits(y))
		}
	case []string:
		for _, y := range x {
			e.str(y)
		}
	case []Value:
		for _, y := range x {
			e.array(y)
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("gguf: cannot encode a value of Go type %T", v.v)
		}
	}
}
