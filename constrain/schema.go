package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
	props    []prop // in the schema's order; nil: any properties
	required uint64 // a bit per prop
	items    *Schema
	minItems int
	maxItems int // -1: no bound
	enum     []string
	// alias, when set, is the schema this one stands for (a $ref, or one of
	// anyOf's schemas beside null): a pointer, so that a recursive schema is
	// a cycle and not a copy made before its definition was complete.
	alias    *Schema
	nullable bool // with alias: null too
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

// target is the schema s stands for, past aliases (ParseSchema refuses a
// cycle of aliases alone).
func (s *Schema) target() *Schema {
	for s != nil && s.alias != nil {
		s = s.alias
	}
	return s
}

// allows reports whether a value of type t may appear.
func (s *Schema) allows(t typeSet) bool {
	for ; s != nil && s.alias != nil; s = s.alias {
		if s.nullable && t == tNull {
			return true
		}
	}
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
	s = s.target()
	return s != nil && s.types&tInteger != 0 && s.types&tNumber == 0
}

// maxProps is how many properties an object schema may have (and values an
// enum).
const maxProps = 64

// ParseSchema reads a JSON Schema for an answer, which must describe an
// object. An error names the keyword that cannot be held.
func ParseSchema(raw json.RawMessage) (*Schema, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(raw, &root); err != nil || root == nil {
		return nil, fmt.Errorf("the schema is not a JSON object")
	}
	p := &schemaParser{defs: map[string]json.RawMessage{}, done: map[string]*Schema{}, busy: map[string]int{}}
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
	s, err := p.parse(raw, "", 0)
	if err != nil {
		return nil, err
	}
	if s = s.target(); s == nil || s.types != tObject {
		return nil, fmt.Errorf("the schema must describe an object (type \"object\")")
	}
	if err := finiteValues(s); err != nil {
		return nil, err
	}
	return s, nil
}

// finiteValues refuses a schema with a part no finite JSON value meets (a
// required property or an array's required items that lead back to the
// schema they are in): the walk could start such a value and would nest
// until its depth limit cut the answer off. Which parts have a value is a
// least fixed point over the schema's graph (recursion through $ref makes
// it one): a scalar or null, an object whose required properties have
// values, an array of its minItems items that have one. Every object or
// array a schema allows must have one, not only the schema as a whole.
func finiteValues(root *Schema) error {
	var nodes []*Schema
	seen := map[*Schema]bool{}
	var visit func(s *Schema)
	visit = func(s *Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		nodes = append(nodes, s)
		visit(s.alias)
		visit(s.items)
		for _, p := range s.props {
			visit(p.s)
		}
	}
	visit(root)
	has := map[*Schema]bool{}
	value := func(s *Schema) bool { return s == nil || has[s] }
	// deadObject is the first required property of s that has no value yet, ""
	// when there is none; deadArray whether s's required items have none.
	deadObject := func(s *Schema) string {
		for i, p := range s.props {
			if s.required&(1<<i) != 0 && !value(p.s) {
				return p.name
			}
		}
		return ""
	}
	deadArray := func(s *Schema) bool { return s.minItems > 0 && !value(s.items) }
	for changed := true; changed; {
		changed = false
		for _, s := range nodes {
			if has[s] {
				continue
			}
			ok := false
			switch {
			case s.alias != nil:
				ok = s.nullable || value(s.alias)
			case s.types == tAny, s.types&(tString|tNumber|tInteger|tBool|tNull) != 0:
				ok = true // ParseSchema refuses an enum none of whose values fits
			default:
				ok = s.types&tObject != 0 && deadObject(s) == "" || s.types&tArray != 0 && !deadArray(s)
			}
			if ok {
				has[s], changed = true, true
			}
		}
	}
	for _, s := range nodes { // the objects and arrays say best where it is
		switch {
		case s.alias == nil && s.types&tObject != 0 && deadObject(s) != "":
			return fmt.Errorf("no finite JSON value meets the schema: the required property %q leads back to its own schema without end", deadObject(s))
		case s.alias == nil && s.types&tArray != 0 && deadArray(s):
			return fmt.Errorf("no finite JSON value meets the schema: an array's required items lead back to their own schema without end")
		}
	}
	for _, s := range nodes {
		if s.alias != nil && !value(s.alias) {
			return fmt.Errorf("no finite JSON value meets a $ref or anyOf branch of the schema: what it requires leads back to itself without end")
		}
	}
	return nil
}

type schemaParser struct {
	defs map[string]json.RawMessage
	done map[string]*Schema // resolved refs, so that a recursive schema is one cycle
	busy map[string]int     // refs being resolved, and the nesting they started at
}

// ignored are annotations and limits the walk does not hold.
var ignored = map[string]bool{"$schema": true, "$id": true, "$defs": true, "definitions": true, "title": true,
	"description": true, "default": true, "examples": true, "format": true, "pattern": true, "minLength": true,
	"maxLength": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "$comment": true, "readOnly": true, "writeOnly": true, "deprecated": true, "strict": true,
	"name": true}

// parse reads the schema at path at (for messages), nested depth objects
// and arrays deep.
func (p *schemaParser) parse(raw json.RawMessage, at string, depth int) (*Schema, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%sthe schema nests deeper than %d", where(at), MaxDepth)
	}
	if t := bytes.TrimSpace(raw); string(t) == "true" || string(t) == "{}" {
		return &Schema{maxItems: -1}, nil // anything
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%snot a schema object", where(at))
	}
	var others []string // keywords besides annotations
	for k := range m {
		if !ignored[k] {
			others = append(others, k)
		}
	}
	slices.Sort(others) // errors in a stable order
	if ref, ok := m["$ref"]; ok {
		if len(others) > 1 {
			return nil, fmt.Errorf("%s$ref with other keywords is not supported", where(at))
		}
		return p.ref(ref, at, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := m[k]; ok {
			if len(others) > 1 {
				return nil, fmt.Errorf("%s%s with other keywords is not supported", where(at), k)
			}
			return p.nullable(k, v, at, depth)
		}
	}
	s := &Schema{maxItems: -1}
	var enum, konst json.RawMessage
	for _, k := range others {
		v := m[k]
		var err error
		switch k {
		case "type":
			err = s.parseType(v)
		case "properties":
			err = p.parseProps(s, v, at, depth)
		case "required":
			// after properties, below
		case "additionalProperties":
			if t := string(bytes.TrimSpace(v)); t != "false" {
				err = fmt.Errorf("additionalProperties other than false is not supported")
			}
		case "items":
			s.items, err = p.parse(v, at+"items.", depth+1)
		case "minItems", "maxItems":
			var n int
			if err = json.Unmarshal(v, &n); err != nil || n < 0 {
				err = fmt.Errorf("%s is not a count", k)
			} else if k == "minItems" {
				s.minItems = n
			} else {
				s.maxItems = n
			}
		case "enum":
			enum = v
		case "const":
			konst = v
		default:
			err = fmt.Errorf("%s is not supported", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s%w", where(at), err)
		}
	}
	if _, ok := m["additionalProperties"]; ok && s.props == nil {
		s.props = []prop{} // no properties at all
	}
	if s.props != nil && s.types == tAny {
		s.types = tObject
	}
	if s.items != nil && s.types == tAny {
		s.types = tArray
	}
	if enum != nil || konst != nil {
		if err := s.parseEnum(enum, konst); err != nil {
			return nil, fmt.Errorf("%s%w", where(at), err)
		}
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

// ref resolves a $ref into $defs. A ref met again while its definition is
// read at the same nesting is a cycle of aliases with nothing in it (no
// value could ever be written), and is refused.
func (p *schemaParser) ref(raw json.RawMessage, at string, depth int) (*Schema, error) {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		return nil, fmt.Errorf("%s$ref is not a string", where(at))
	}
	if d, busy := p.busy[name]; busy && d == depth {
		return nil, fmt.Errorf("%s$ref %q refers to itself with nothing in between", where(at), name)
	}
	if s, ok := p.done[name]; ok {
		return &Schema{alias: s}, nil
	}
	d, ok := p.defs[name]
	if !ok {
		return nil, fmt.Errorf("%s$ref %q is not under $defs", where(at), name)
	}
	s := &Schema{maxItems: -1}
	p.done[name], p.busy[name] = s, depth
	got, err := p.parse(d, name+".", depth)
	delete(p.busy, name)
	if err != nil {
		return nil, err
	}
	*s = *got // the placeholder others point to becomes the definition
	return &Schema{alias: s}, nil
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
	case json.Unmarshal(v, &many) == nil && len(many) > 0:
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
func (p *schemaParser) parseProps(s *Schema, v json.RawMessage, at string, depth int) error {
	members, err := membersInOrder(v, maxProps+1)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	if len(members) > maxProps {
		return fmt.Errorf("more than %d properties", maxProps)
	}
	s.props = []prop{}
	for _, m := range members {
		n := m.name
		if needsEscape(n) {
			return fmt.Errorf("property name %q needs escapes, which are not supported", n)
		}
		ps, err := p.parse(m.value, at+n+".", depth+1)
		if err != nil {
			return err
		}
		s.props = append(s.props, prop{n, ps})
	}
	return nil
}

// member is one of a JSON object's members.
type member struct {
	name  string
	value json.RawMessage
}

// membersInOrder lists a JSON object's first limit members as written (a
// request's body may hold many thousands, and each name is checked against
// those before it).
func membersInOrder(raw json.RawMessage, limit int) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var members []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := t.(string)
		if slices.ContainsFunc(members, func(m member) bool { return m.name == k }) {
			return nil, fmt.Errorf("%q is there twice", k)
		}
		m := member{name: k}
		if err := dec.Decode(&m.value); err != nil {
			return nil, err
		}
		members = append(members, m)
		if len(members) == limit {
			break
		}
	}
	return members, nil
}

// parseEnum reads an enum and a const: strings written without escapes,
// and null. The value's types become those of its values, within type.
func (s *Schema) parseEnum(enum, konst json.RawMessage) error {
	if enum != nil && konst != nil {
		return fmt.Errorf("enum with const is not supported")
	}
	var vals []any
	if konst != nil {
		var one any
		if err := json.Unmarshal(konst, &one); err != nil {
			return err
		}
		vals = []any{one}
	} else if err := json.Unmarshal(enum, &vals); err != nil || len(vals) == 0 {
		return fmt.Errorf("enum is not a list of values")
	}
	if len(vals) > maxProps {
		return fmt.Errorf("enum has more than %d values", maxProps)
	}
	var types typeSet
	for _, v := range vals {
		if v == nil {
			types |= tNull
			continue
		}
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("enum and const values other than strings and null are not supported")
		}
		if needsEscape(str) {
			return fmt.Errorf("enum value %q needs escapes, which are not supported", str)
		}
		s.enum = append(s.enum, str)
		types |= tString
	}
	if s.types != tAny {
		types &= s.types
	}
	if types == 0 {
		return fmt.Errorf("no enum value is of the type")
	}
	s.types = types
	if s.enum == nil {
		s.enum = []string{} // null alone: no string
	}
	return nil
}

// nullable reads anyOf or oneOf of one schema and a schema of null alone
// ({"type": "null"}, with a description or as a list, or a const null): an
// alias of the schema that allows null too.
func (p *schemaParser) nullable(k string, v json.RawMessage, at string, depth int) (*Schema, error) {
	var alts []json.RawMessage
	if err := json.Unmarshal(v, &alts); err != nil {
		return nil, fmt.Errorf("%s%s is not a list", where(at), k)
	}
	var other *Schema
	nullable := false
	for _, a := range alts {
		s, err := p.parse(a, at, depth)
		switch {
		case err != nil:
			return nil, err
		case s.alias == nil && s.types == tNull:
			nullable = true
		case other != nil:
			return nil, fmt.Errorf("%s%s of more than one schema besides null is not supported", where(at), k)
		default:
			other = s
		}
	}
	if other == nil {
		return &Schema{types: tNull, maxItems: -1}, nil
	}
	return &Schema{alias: other, nullable: nullable, maxItems: -1}, nil
}

// needsEscape reports whether s would need escapes in a JSON string (the walk matches names and enum
// values byte for byte as written).
func needsEscape(s string) bool {
	return strings.ContainsAny(s, "\"\\") || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 }) >= 0
}
