package gguf

import (
	"bytes"
	"fmt"
	"math"
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// fixedSize is the encoded size of a scalar of type t; 0 for strings and arrays.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take; it bounds
// how many elements an array can honestly claim for the bytes left in a file.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8 // the length
	case TypeArray:
		return 12 // element type and count
	}
	return t.fixedSize()
}

// Value is one metadata value. Scalars hold the Go type of the same width
// (uint8, int8, ..., float64, bool, string); arrays hold a typed slice
// ([]uint8 ... []float64, []bool, []string) or, for arrays of arrays, []Value.
type Value struct {
	typ  ValueType
	elem ValueType // element type when typ is TypeArray
	v    any
}

// Type is the value's type tag.
func (v Value) Type() ValueType { return v.typ }

// ElemType is the element type of an array value.
func (v Value) ElemType() ValueType { return v.elem }

// Interface returns the Go value: a scalar, a typed slice, or []Value.
func (v Value) Interface() any { return v.v }

// Constructors for the writer and for tests.
func Uint8(x uint8) Value     { return Value{typ: TypeUint8, v: x} }
func Int8(x int8) Value       { return Value{typ: TypeInt8, v: x} }
func Uint16(x uint16) Value   { return Value{typ: TypeUint16, v: x} }
func Int16(x int16) Value     { return Value{typ: TypeInt16, v: x} }
func Uint32(x uint32) Value   { return Value{typ: TypeUint32, v: x} }
func Int32(x int32) Value     { return Value{typ: TypeInt32, v: x} }
func Float32(x float32) Value { return Value{typ: TypeFloat32, v: x} }
func Bool(x bool) Value       { return Value{typ: TypeBool, v: x} }
func String(x string) Value   { return Value{typ: TypeString, v: x} }
func Uint64(x uint64) Value   { return Value{typ: TypeUint64, v: x} }
func Int64(x int64) Value     { return Value{typ: TypeInt64, v: x} }
func Float64(x float64) Value { return Value{typ: TypeFloat64, v: x} }

// Array constructors, one per element type. The slice is kept, not copied.
func Uint8s(x []uint8) Value     { return Value{typ: TypeArray, elem: TypeUint8, v: x} }
func Int8s(x []int8) Value       { return Value{typ: TypeArray, elem: TypeInt8, v: x} }
func Uint16s(x []uint16) Value   { return Value{typ: TypeArray, elem: TypeUint16, v: x} }
func Int16s(x []int16) Value     { return Value{typ: TypeArray, elem: TypeInt16, v: x} }
func Uint32s(x []uint32) Value   { return Value{typ: TypeArray, elem: TypeUint32, v: x} }
func Int32s(x []int32) Value     { return Value{typ: TypeArray, elem: TypeInt32, v: x} }
func Float32s(x []float32) Value { return Value{typ: TypeArray, elem: TypeFloat32, v: x} }
func Bools(x []bool) Value       { return Value{typ: TypeArray, elem: TypeBool, v: x} }
func Strings(x []string) Value   { return Value{typ: TypeArray, elem: TypeString, v: x} }
func Uint64s(x []uint64) Value   { return Value{typ: TypeArray, elem: TypeUint64, v: x} }
func Int64s(x []int64) Value     { return Value{typ: TypeArray, elem: TypeInt64, v: x} }
func Float64s(x []float64) Value { return Value{typ: TypeArray, elem: TypeFloat64, v: x} }

// Arrays builds an array of arrays.
func Arrays(x []Value) Value { return Value{typ: TypeArray, elem: TypeArray, v: x} }

// Equal reports whether v and w have the same type and the same encoding:
// floats compare by their bits, so a NaN equals itself and -0 differs from 0.
func (v Value) Equal(w Value) bool {
	if v.typ != w.typ || v.elem != w.elem {
		return false
	}
	var a, b bytes.Buffer
	ea, eb := encoder{w: &a}, encoder{w: &b}
	ea.value(v)
	eb.value(w)
	return ea.err == nil && eb.err == nil && bytes.Equal(a.Bytes(), b.Bytes())
}

// String returns a string value.
func (v Value) String() (string, bool) {
	s, ok := v.v.(string)
	return s, ok
}

// Uint returns any non-negative integer value as uint64.
func (v Value) Uint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.Int(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns any integer value that fits in int64.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// Float returns any numeric value as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	if u, ok := v.Uint(); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	b, ok := v.v.(bool)
	return b, ok
}

// Len is the element count of an array value (0 for scalars).
func (v Value) Len() int {
	switch x := v.v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// StringArray returns an array of strings.
func (v Value) StringArray() ([]string, bool) {
	s, ok := v.v.([]string)
	return s, ok
}

// IntArray returns an array of any integer element type as int64s.
func (v Value) IntArray() ([]int64, bool) {
	out := make([]int64, 0, v.Len())
	switch x := v.v.(type) {
	case []uint8:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []int8:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []uint16:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []int16:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []uint32:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []int32:
		for _, e := range x {
			out = append(out, int64(e))
		}
	case []int64:
		out = append(out, x...)
	case []uint64:
		for _, e := range x {
			if e > math.MaxInt64 {
				return nil, false
			}
			out = append(out, int64(e))
		}
	default:
		return nil, false
	}
	return out, true
}

// Format renders the value for people: scalars as themselves, arrays by their
// type and length with the first few elements.
func (v Value) Format() string {
	if v.typ != TypeArray {
		if s, ok := v.v.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.v)
	}
	n := v.Len()
	const show = 4
	var head string
	switch x := v.v.(type) {
	case []string:
		head = fmt.Sprintf("%q", x[:min(n, show)])
	case []Value:
		head = "[...]"
	default:
		if n <= show {
			head = fmt.Sprint(x)
		} else {
			head = "[...]"
		}
	}
	return fmt.Sprintf("[%s × %d] %s", v.elem, n, head)
}
