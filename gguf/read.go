// Package gguf reads and writes GGUF files: the key-value metadata, the tensor
// directory, and the tensor data, which the reader memory-maps rather than copies.
//
// A GGUF file is often the wrong file, a truncated download or hostile input,
// so the reader checks every count and offset against the bytes that are
// really there before it trusts or allocates for it, and every error names the
// file and the defect.
package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/latent-ai/latent/quant"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a ggml tensor has.
const MaxDims = 4

// maxNesting bounds arrays of arrays so a crafted file cannot recurse without end.
const maxNesting = 8

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor: its dimensions innermost first (Dims[0] is
// the row length), element type, and where its data lies.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   quant.Type
	Offset uint64 // from the start of the data section
	Size   int64  // bytes of data
}

// Elements is the number of weights in the tensor.
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Dim returns dimension i, or 1 past the tensor's rank (as ggml pads shapes).
func (t *TensorInfo) Dim(i int) uint64 {
	if i < len(t.Dims) {
		return t.Dims[i]
	}
	return 1
}

// File is a parsed GGUF file. Tensor data stays in the (mapped) file image.
type File struct {
	Name       string // the path or label errors name
	Version    uint32
	Alignment  uint64
	KV         []KV
	Tensors    []TensorInfo
	DataOffset int64 // where the data section starts in the file
	Size       int64 // the file's size in bytes

	data    []byte
	keys    map[string]int
	tensors map[string]int
	close   func() error
}

// Get returns the metadata value under key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData is the tensor's bytes, a view into the file image (read-only when
// the file is mapped). It is valid until Close.
func (f *File) TensorData(t *TensorInfo) []byte {
	start := f.DataOffset + int64(t.Offset)
	return f.data[start : start+t.Size : start+t.Size]
}

// Close releases the file mapping.
func (f *File) Close() error {
	if f.close == nil {
		return nil
	}
	c := f.close
	f.close, f.data = nil, nil
	return c()
}

// Parse reads a GGUF image held in memory. name labels errors. data is kept,
// not copied: tensor data are slices of it. A malformed image gives an error
// that starts with name and says what is wrong and where; truncation errors
// wrap ErrTruncated.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Name: name, Size: int64(len(data)), data: data}
	if err := f.parse(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// ErrTruncated is wrapped by every error about a read past the end of the file.
var ErrTruncated = errors.New("file is truncated")

// The fewest bytes a tensor directory entry (name length, rank, one
// dimension, type, offset) and a metadata entry (key length, type, a one-byte
// value) can take: claimed counts are checked against them before anything is
// allocated for them.
const (
	minTensorInfo = 8 + 4 + 8 + 4 + 8
	minKV         = 8 + 4 + 1
)

// A decoder walks the header, refusing any read past the end. The what
// arguments are constants so that the success path formats nothing; callers
// wrap errors with the key, element or tensor they concern.
type decoder struct {
	b   []byte
	off int
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) bytes(n int, what string) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, fmt.Errorf("%s (%d bytes) at offset %d: %w", what, n, d.off, ErrTruncated)
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	p, err := d.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	p, err := d.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str(what string) (string, error) {
	p, err := d.strBytes(what)
	return string(p), err
}

// skipStr checks and steps over a string, returning its length.
func (d *decoder) skipStr() (int, error) {
	p, err := d.strBytes("string")
	return len(p), err
}

// strBytes reads a length-prefixed string, checking the claimed length
// against the bytes left before it moves past them.
func (d *decoder) strBytes(what string) ([]byte, error) {
	at := d.off
	if d.left() < 8 { // checked here so that no message is built on success
		return nil, fmt.Errorf("%s length (8 bytes) at offset %d: %w", what, at, ErrTruncated)
	}
	n := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	if n > uint64(d.left()) {
		return nil, fmt.Errorf("%s at offset %d claims %d bytes but only %d remain in the file: %w", what, at, n, d.left(), ErrTruncated)
	}
	p := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return p, nil
}

// count reads an element count and checks that at least minEach bytes per
// element remain, so no allocation can exceed what the file holds.
func (d *decoder) count(what string, minEach int) (int, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/minEach) {
		return 0, fmt.Errorf("%s at offset %d is %d, more than the %d bytes left in the file can hold", what, at, n, d.left())
	}
	return int(n), nil
}

// clip shortens a name read from the file for an error message, so that a
// hostile megabyte-long key does not become a megabyte-long message.
func clip(s string) string {
	const most = 80
	if len(s) > most {
		return fmt.Sprintf("%q... (%d bytes)", s[:most], len(s))
	}
	return strconv.Quote(s)
}

func (f *File) parse() error {
	d := &decoder{b: f.data}
	magic, err := d.u32("magic")
	if err != nil {
		return fmt.Errorf("not a GGUF file: %w", err)
	}
	if magic != Magic {
		return fmt.Errorf("not a GGUF file: magic is %q, want \"GGUF\"", f.data[:4])
	}
	f.Version, err = d.u32("version")
	if err != nil {
		return err
	}
	switch v, swapped := f.Version, bits.ReverseBytes32(f.Version); {
	case v == 2 || v == 3:
	case v == 1:
		return fmt.Errorf("GGUF version 1 is not supported (only 2 and 3): convert the file again with a current llama.cpp")
	case swapped >= 1 && swapped <= 3:
		return fmt.Errorf("big-endian GGUF (version %d stored byte-swapped) is not supported", swapped)
	default:
		return fmt.Errorf("unknown GGUF version %d (supported: 2, 3)", v)
	}
	nTensors, err := d.count("tensor count", minTensorInfo)
	if err != nil {
		return err
	}
	nKV, err := d.count("metadata count", minKV)
	if err != nil {
		return err
	}
	// Each count fits the remaining bytes alone; together they must too.
	if need := uint64(nTensors)*minTensorInfo + uint64(nKV)*minKV; need > uint64(d.left()) {
		return fmt.Errorf("%d tensors and %d metadata entries need at least %d bytes but only %d remain in the file", nTensors, nKV, need, d.left())
	}

	// The slice is sized to the claimed count, which is bounded above; the
	// lookup map, whose slots cost more than the bytes an entry needs, grows
	// with the entries really read.
	f.KV = make([]KV, 0, nKV)
	f.keys = make(map[string]int)
	for i := 0; i < nKV; i++ {
		key, err := d.str("key")
		if err != nil {
			return fmt.Errorf("metadata #%d: %w", i, err)
		}
		if j, dup := f.keys[key]; dup {
			return fmt.Errorf("metadata key %s appears twice (entries #%d and #%d)", clip(key), j, i)
		}
		t, err := d.u32("value type")
		if err != nil {
			return fmt.Errorf("metadata %s: %w", clip(key), err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata %s: %w", clip(key), err)
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.v.(uint32)
		if !ok {
			return fmt.Errorf("general.alignment is a %s, want uint32", v.typ)
		}
		if a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		f.Alignment = uint64(a)
	}

	// The metadata may have used most of the bytes the count was checked against.
	if nTensors > d.left()/minTensorInfo {
		return fmt.Errorf("tensor count %d is more than the %d bytes left after the metadata can hold", nTensors, d.left())
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tensors = make(map[string]int)
	for i := 0; i < nTensors; i++ {
		t, err := d.tensorInfo()
		if err != nil {
			if t.Name == "" {
				return fmt.Errorf("tensor #%d: %w", i, err)
			}
			return fmt.Errorf("tensor #%d %s: %w", i, clip(t.Name), err)
		}
		if j, dup := f.tensors[t.Name]; dup {
			return fmt.Errorf("tensor %s appears twice (tensors #%d and #%d)", clip(t.Name), j, i)
		}
		if t.Offset%f.Alignment != 0 {
			return fmt.Errorf("tensor %s: data offset %d is not a multiple of the alignment %d", clip(t.Name), t.Offset, f.Alignment)
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	start := (uint64(d.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	f.DataOffset = int64(start)
	return f.checkData()
}

// tensorInfo reads one directory entry. On error the name, if it was read, is
// in the returned TensorInfo for the caller's message.
func (d *decoder) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = d.str("name"); err != nil {
		return t, err
	}
	rank, err := d.u32("rank")
	if err != nil {
		return t, err
	}
	if rank == 0 || rank > MaxDims {
		return t, fmt.Errorf("%d dimensions (must be 1 to %d)", rank, MaxDims)
	}
	t.Dims = make([]uint64, rank)
	for j := range t.Dims {
		if t.Dims[j], err = d.u64("dimension"); err != nil {
			return t, err
		}
	}
	n, err := elements(t.Dims)
	if err != nil {
		return t, err
	}
	typ, err := d.u32("type")
	if err != nil {
		return t, err
	}
	t.Type = quant.Type(typ)
	if !t.Type.Known() {
		return t, fmt.Errorf("unknown tensor type %d", typ)
	}
	if t.Dims[0]%uint64(t.Type.BlockSize()) != 0 {
		return t, fmt.Errorf("row length %d is not a multiple of the %s block size %d", t.Dims[0], t.Type, t.Type.BlockSize())
	}
	if t.Size, err = t.Type.RowBytes(n); err != nil {
		return t, err
	}
	if t.Offset, err = d.u64("offset"); err != nil {
		return t, err
	}
	return t, nil
}

// elements is the weight count of a tensor with dims. Reader and writer
// both demand that the product of the non-zero dimensions fit in an int64, so
// that no partial product a consumer computes can overflow either, whatever
// the order and even when another dimension is zero (an empty tensor).
func elements(dims []uint64) (int64, error) {
	n, product := uint64(1), uint64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(product, max(d, 1))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("dimensions %v overflow the element count", dims)
		}
		product = lo
		n *= d
	}
	return int64(n), nil
}

// checkData verifies that every tensor lies inside the file and that no two
// overlap. Empty tensors occupy no bytes and so overlap nothing.
func (f *File) checkData() error {
	if len(f.Tensors) > 0 && f.DataOffset > f.Size {
		return fmt.Errorf("data section starts at %d, past the end of the %d-byte file: %w", f.DataOffset, f.Size, ErrTruncated)
	}
	avail := uint64(f.Size - min(f.DataOffset, f.Size))
	order := make([]int, 0, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		end := t.Offset + uint64(t.Size)
		if end < t.Offset || end > avail {
			return fmt.Errorf("tensor %s: data [%d, %d) runs past the end of the file (%d bytes of data from offset %d): %w",
				clip(t.Name), t.Offset, end, avail, f.DataOffset, ErrTruncated)
		}
		if t.Size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		p, t := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if t.Offset < p.Offset+uint64(p.Size) {
			return fmt.Errorf("tensor %s (data [%d, %d)) overlaps tensor %s (data [%d, %d))",
				clip(t.Name), t.Offset, t.Offset+uint64(t.Size), clip(p.Name), p.Offset, p.Offset+uint64(p.Size))
		}
	}
	return nil
}

func (d *decoder) value(t ValueType, depth int) (Value, error) {
	if fs := t.fixedSize(); fs > 0 {
		p, err := d.bytes(fs, "value")
		if err != nil {
			return Value{}, err
		}
		return scalar(t, p)
	}
	switch t {
	case TypeString:
		s, err := d.str("string")
		return Value{typ: t, v: s}, err
	case TypeArray:
		if depth >= maxNesting {
			return Value{}, fmt.Errorf("arrays nested more than %d deep", maxNesting)
		}
		et, err := d.u32("array element type")
		if err != nil {
			return Value{}, err
		}
		elem := ValueType(et)
		if elem.minSize() == 0 {
			return Value{}, fmt.Errorf("unknown array element type %d", et)
		}
		n, err := d.count("array length", elem.minSize())
		if err != nil {
			return Value{}, err
		}
		return d.array(elem, n, depth)
	}
	return Value{}, fmt.Errorf("unknown value type %d", uint32(t))
}

func scalar(t ValueType, p []byte) (Value, error) {
	v := Value{typ: t}
	switch t {
	case TypeUint8:
		v.v = p[0]
	case TypeInt8:
		v.v = int8(p[0])
	case TypeBool:
		if p[0] > 1 {
			return v, fmt.Errorf("bool value %d is neither 0 nor 1", p[0])
		}
		v.v = p[0] == 1
	case TypeUint16:
		v.v = binary.LittleEndian.Uint16(p)
	case TypeInt16:
		v.v = int16(binary.LittleEndian.Uint16(p))
	case TypeUint32:
		v.v = binary.LittleEndian.Uint32(p)
	case TypeInt32:
		v.v = int32(binary.LittleEndian.Uint32(p))
	case TypeFloat32:
		v.v = math.Float32frombits(binary.LittleEndian.Uint32(p))
	case TypeUint64:
		v.v = binary.LittleEndian.Uint64(p)
	case TypeInt64:
		v.v = int64(binary.LittleEndian.Uint64(p))
	case TypeFloat64:
		v.v = math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
	return v, nil
}

func (d *decoder) array(elem ValueType, n, depth int) (Value, error) {
	v := Value{typ: TypeArray, elem: elem}
	if fs := elem.fixedSize(); fs > 0 {
		p, err := d.bytes(n*fs, "array data")
		if err != nil {
			return v, err
		}
		v.v, err = fixedArray(elem, p, n)
		return v, err
	}
	switch elem {
	case TypeString:
		// A vocabulary is 100k+ short strings: validate them all, then copy
		// their bytes (length prefixes included) into one string and slice
		// it, one allocation instead of one per token.
		start := d.off
		for i := 0; i < n; i++ {
			if _, err := d.skipStr(); err != nil {
				return v, fmt.Errorf("array element #%d: %w", i, err)
			}
		}
		blob := string(d.b[start:d.off])
		s := make([]string, n)
		for i, at := 0, 0; i < n; i++ {
			l := int(binary.LittleEndian.Uint64(d.b[start+at:]))
			s[i] = blob[at+8 : at+8+l]
			at += 8 + l
		}
		v.v = s
	case TypeArray:
		a := make([]Value, n)
		for i := range a {
			var err error
			if a[i], err = d.value(TypeArray, depth+1); err != nil {
				return v, fmt.Errorf("array element #%d: %w", i, err)
			}
		}
		v.v = a
	}
	return v, nil
}

func fixedArray(elem ValueType, p []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch elem {
	case TypeUint8:
		return append([]uint8(nil), p...), nil
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(p[i])
		}
		return a, nil
	case TypeBool:
		a := make([]bool, n)
		for i := range a {
			if p[i] > 1 {
				return nil, fmt.Errorf("bool array element #%d is %d, neither 0 nor 1", i, p[i])
			}
			a[i] = p[i] == 1
		}
		return a, nil
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(p[2*i:])
		}
		return a, nil
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(p[2*i:]))
		}
		return a, nil
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(p[4*i:])
		}
		return a, nil
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(p[4*i:]))
		}
		return a, nil
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(p[4*i:]))
		}
		return a, nil
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(p[8*i:])
		}
		return a, nil
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(p[8*i:]))
		}
		return a, nil
	case TypeFloat64:
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(p[8*i:]))
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown array element type %d", uint32(elem))
}
