package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Template values mirror Python's: JSON objects become *exec.Dict, gonja's ordered dict, because Python dicts
// keep insertion order and templates print them (tojson, items()); arrays become []any; numbers become int
// or float64 as Python's json module would decode them.

// dict is the message as transformers hands it to the template: role and content always, the rest only when set.
func (m Message) dict() (*exec.Dict, error) {
	d := exec.NewDict()
	put(d, "role", m.Role)
	put(d, "content", m.Content)
	if m.ReasoningContent != "" {
		put(d, "reasoning_content", m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			c := exec.NewDict()
			if tc.ID != "" {
				put(c, "id", tc.ID)
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			put(c, "type", typ)
			f := exec.NewDict()
			put(f, "name", tc.Function.Name)
			var args any = exec.NewDict()
			if len(tc.Function.Arguments) > 0 {
				v, err := decodeJSON(tc.Function.Arguments)
				if err != nil {
					return nil, fmt.Errorf("tool call %d arguments: %w", i, err)
				}
				args = v
			}
			put(f, "arguments", args)
			put(c, "function", f)
			calls[i] = c
		}
		put(d, "tool_calls", calls)
	}
	if m.ToolCallID != "" {
		put(d, "tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		put(d, "name", m.Name)
	}
	return d, nil
}

func put(d *exec.Dict, key string, v any) {
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
}

// decodeJSON decodes one JSON value keeping object keys in order.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := exec.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				key := kt.(string) // the decoder guarantees object keys are strings
				if i := dictIndex(d, key); i >= 0 {
					d.Pairs[i].Value = exec.AsValue(v) // Python keeps the last value, in the first position
				} else {
					put(d, key, v)
				}
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ']'
			return list, err
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %v", t)
	case json.Number:
		return pyNumber(t)
	default: // string, bool, nil
		return t, nil
	}
}

func dictIndex(d *exec.Dict, key string) int {
	for i, p := range d.Pairs {
		if p.Key.IsString() && p.Key.String() == key {
			return i
		}
	}
	return -1
}

// pyNumber decodes a JSON number as Python's json module does: int unless it has a fraction or an exponent.
func pyNumber(n json.Number) (any, error) {
	if !strings.ContainsAny(string(n), ".eE") {
		if i, err := n.Int64(); err == nil {
			return int(i), nil
		}
	}
	f, err := n.Float64()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON number %s", n)
	}
	return f, nil
}

// pyValue converts a Go value for the template: json.RawMessage as decodeJSON, maps to dicts in sorted key
// order, slices to lists, numbers to int or float64.
func pyValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, int, float64, *exec.Dict:
		return x, nil
	case json.RawMessage:
		return decodeJSON(x)
	case json.Number:
		return pyNumber(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		list := make([]any, rv.Len())
		for i := range list {
			e, err := pyValue(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			list[i] = e
		}
		return list, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map with %s keys; keys must be strings", rv.Type().Key())
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		d := exec.NewDict()
		for _, k := range keys {
			e, err := pyValue(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface())
			if err != nil {
				return nil, err
			}
			put(d, k, e)
		}
		return d, nil
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return pyValue(rv.Elem().Interface())
	}
	return nil, fmt.Errorf("unsupported type %T", v)
}
