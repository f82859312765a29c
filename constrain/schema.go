package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Schema is the part of a JSON Schema (draft 2020-12, as OpenAI's and
// Ollama's structured outputs take it) that an answer is held to while it
// is written: types, an object's properties (no others) and which are
// required, an array's items and bounds, string enums and consts, nullable
// alternatives, and $ref into $defs. What a byte-by-byte walk cannot hold
// (pattern, format, lengths, numeric bounds) is not enforced; keywords that
// change which values are valid in other ways are refused by ParseSchema.
type Schema struct {
	types    typeSet
	props    []prop // in the schema's order
	required uint64 // a bit per prop
	items    *Schema
	minItems int
	maxItems int // -1: no bound
	enum     []string
}

type prop struct {
	name string
	s    *Schema
}

type typeSet uint8

const (
	tString typeSet = 1 << iota
	tNumber
	tInteger
	tBool
	tNull
	tObject
	tArray
	tAny typeSet = 0 // no type given: any value
)

var typeNames = map[string]typeSet{"string": tString, "number": tNumber, "integer": tInteger, "boolean": tBool,
	"null": tNull, "object": tObject, "array": tArray}

// allows reports whether a value of type t may appear.
func (s *Schema) allows(t typeSet) bool {
	if s == nil || s.types == tAny {
		return true
	}
	if t == tNumber && s.types&tInteger != 0 {
		return true // the walk tells an integer from a number by its bytes
	}
	return s.types&t != 0
}

// integer reports whether numbers must be integers.
func (s *Schema) integer() bool {
	return s != nil && s.types&tInteger != 0 && s.types&tNumber == 0
}

// maxProps is how many properties an object schema may have.
const maxProps = 64

// ParseSchema reads a JSON Schema for an answer, which must describe an
// object. An error names the keyword that cannot be held.
func ParseSchema(raw json.RawMessage) (*Schema, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("the schema is not a JSON object")
	}
	p := &schemaParser{defs: map[string]json.RawMessage{}, done: map[string]*Schema{}}
	for _, key := range []string{"$defs", "definitions"} {
		var defs map[string]json.RawMessage
		if d, ok := root[key]; ok {
			if err := json.Unmarshal(d, &defs); err != nil {
				return nil, fmt.Errorf("%s is not an object", key)
			}
			for name, d := range defs {
				p.defs["#/"+key+"/"+name] = d
			}
		}
	}
	s, err := p.parse(raw, "")
	if err != nil {
		return nil, err
	}
	if s.types != tObject {
		return nil, fmt.Errorf("the schema must describe an object (type \"object\")")
	}
	return s, nil
}

type schemaParser struct {
	defs map[string]json.RawMessage
	done map[string]*Schema // resolved refs, so that a recursive schema is one cycle
}

// ignored are annotations and limits the walk does not hold.
var ignored = map[string]bool{"$schema": true, "$id": true, "$defs": true, "definitions": true, "title": true,
	"description": true, "default": true, "examples": true, "format": true, "pattern": true, "minLength": true,
	"maxLength": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "$comment": true, "readOnly": true, "writeOnly": true, "deprecated": true, "strict": true,
	"name": true}

func (p *schemaParser) parse(raw json.RawMessage, at string) (*Schema, error) {
	if t := bytes.TrimSpace(raw); string(t) == "true" || string(t) == "{}" {
		return &Schema{maxItems: -1}, nil // anything
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s is not a schema object", where(at))
	}
	if ref, ok := m["$ref"]; ok {
		var name string
		if json.Unmarshal(ref, &name) != nil {
			return nil, fmt.Errorf("%s$ref is not a string", where(at))
		}
		if s, ok := p.done[name]; ok {
			return s, nil
		}
		d, ok := p.defs[name]
		if !ok {
			return nil, fmt.Errorf("%s$ref %q is not under $defs", where(at), name)
		}
		s := &Schema{maxItems: -1}
		p.done[name] = s
		got, err := p.parse(d, name+".")
		if err != nil {
			return nil, err
		}
		*s = *got
		return s, nil
	}
	s := &Schema{maxItems: -1}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // errors in a stable order
	for _, k := range keys {
		v := m[k]
		var err error
		switch {
		case ignored[k]:
		case k == "type":
			err = s.parseType(v)
		case k == "properties":
			err = p.parseProps(s, raw, at)
		case k == "required":
			// after properties, below
		case k == "additionalProperties":
			if t := string(bytes.TrimSpace(v)); t != "false" {
				err = fmt.Errorf("additionalProperties other than false is not supported")
			}
		case k == "items":
			s.items, err = p.parse(v, at+"items.")
		case k == "minItems" || k == "maxItems":
			var n int
			if err = json.Unmarshal(v, &n); err != nil || n < 0 {
				err = fmt.Errorf("%s is not a count", k)
			} else if k == "minItems" {
				s.minItems = n
			} else {
				s.maxItems = n
			}
		case k == "enum" || k == "const":
			err = s.parseEnum(k, v)
		case k == "anyOf" || k == "oneOf":
			err = p.parseNullable(s, k, v, at)
		default:
			err = fmt.Errorf("%s is not supported", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s%w", where(at), err)
		}
	}
	if s.props != nil && s.types == tAny {
		s.types = tObject
	}
	if s.items != nil && s.types == tAny {
		s.types = tArray
	}
	if r, ok := m["required"]; ok {
		var names []string
		if json.Unmarshal(r, &names) != nil {
			return nil, fmt.Errorf("%srequired is not a list of names", where(at))
		}
		for _, n := range names {
			i := s.prop(n)
			if i < 0 {
				return nil, fmt.Errorf("%srequired names %q, which is not among the properties", where(at), n)
			}
			s.required |= 1 << i
		}
	}
	if s.maxItems >= 0 && s.maxItems < s.minItems {
		return nil, fmt.Errorf("%smaxItems is less than minItems", where(at))
	}
	return s, nil
}

func where(at string) string {
	if at == "" {
		return ""
	}
	return strings.TrimSuffix(at, ".") + ": "
}

func (s *Schema) prop(name string) int {
	for i, p := range s.props {
		if p.name == name {
			return i
		}
	}
	return -1
}

func (s *Schema) parseType(v json.RawMessage) error {
	var one string
	var many []string
	switch {
	case json.Unmarshal(v, &one) == nil:
		many = []string{one}
	case json.Unmarshal(v, &many) == nil:
	default:
		return fmt.Errorf("type is not a name or a list of names")
	}
	for _, n := range many {
		t, ok := typeNames[n]
		if !ok {
			return fmt.Errorf("type %q is not a JSON type", n)
		}
		s.types |= t
	}
	return nil
}

// parseProps reads properties in the order the schema writes them (the
// order the answer is asked to follow, as OpenAI's strict mode does).
func (p *schemaParser) parseProps(s *Schema, raw json.RawMessage, at string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return err
	}
	names, err := keysInOrder(obj["properties"])
	if err != nil {
		return fmt.Errorf("properties is not an object")
	}
	if len(names) > maxProps {
		return fmt.Errorf("more than %d properties", maxProps)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(obj["properties"], &props); err != nil {
		return fmt.Errorf("properties is not an object")
	}
	s.props = []prop{}
	for _, n := range names {
		if strings.ContainsAny(n, "\"\\") || strings.IndexFunc(n, func(r rune) bool { return r < 0x20 }) >= 0 {
			return fmt.Errorf("property name %q needs escapes, which are not supported", n)
		}
		ps, err := p.parse(props[n], at+n+".")
		if err != nil {
			return err
		}
		s.props = append(s.props, prop{n, ps})
	}
	return nil
}

// keysInOrder lists a JSON object's keys as written.
func keysInOrder(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// parseEnum reads an enum (or a const) of strings, written as JSON strings
// without escapes.
func (s *Schema) parseEnum(k string, v json.RawMessage) error {
	var vals []any
	if k == "const" {
		var one any
		if err := json.Unmarshal(v, &one); err != nil {
			return err
		}
		vals = []any{one}
	} else if err := json.Unmarshal(v, &vals); err != nil || len(vals) == 0 {
		return fmt.Errorf("enum is not a list of values")
	}
	if len(vals) > maxProps {
		return fmt.Errorf("%s has more than %d values", k, maxProps)
	}
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s values other than strings are not supported", k)
		}
		if strings.ContainsAny(str, "\"\\") || strings.IndexFunc(str, func(r rune) bool { return r < 0x20 }) >= 0 {
			return fmt.Errorf("%s value %q needs escapes, which are not supported", k, str)
		}
		s.enum = append(s.enum, str)
	}
	s.types |= tString
	return nil
}

// parseNullable reads anyOf or oneOf of one schema and {"type": "null"}.
func (p *schemaParser) parseNullable(s *Schema, k string, v json.RawMessage, at string) error {
	var alts []json.RawMessage
	if err := json.Unmarshal(v, &alts); err != nil {
		return fmt.Errorf("%s is not a list", k)
	}
	var other *Schema
	nullable := false
	for _, a := range alts {
		if string(bytes.Join(bytes.Fields(a), nil)) == `{"type":"null"}` {
			nullable = true
			continue
		}
		if other != nil {
			return fmt.Errorf("%s of more than one schema besides null is not supported", k)
		}
		var err error
		if other, err = p.parse(a, at); err != nil {
			return err
		}
	}
	if other == nil || s.types != tAny || s.props != nil || s.items != nil || s.enum != nil {
		return fmt.Errorf("%s is supported only as a schema or null, alone", k)
	}
	*s = *other
	if nullable && s.types != tAny {
		s.types |= tNull
	}
	return nil
}
