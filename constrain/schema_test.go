package constrain

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const personSchema = `{"type": "object", "title": "Person",
 "properties": {
  "name": {"type": "string", "description": "who"},
  "age": {"type": "integer", "minimum": 0},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
  "kind": {"enum": ["a", "bb"]},
  "opt": {"anyOf": [{"type": "number"}, {"type": "null"}]},
  "child": {"$ref": "#/$defs/Child"},
  "any": {}
 },
 "required": ["name", "age"],
 "$defs": {"Child": {"type": "object", "properties": {"x": {"type": "boolean"}, "next": {"anyOf": [{"$ref": "#/$defs/Child"}, {"type": "null"}]}}, "required": ["x"]}}}`

func TestSchemaWalk(t *testing.T) {
	s, err := ParseSchema(json.RawMessage(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text  string
		taken int // bytes accepted; -1: all
		done  bool
	}{
		{`{"name": "A", "age": 3}`, -1, true},
		{`{"age": 30, "name": "Bo", "tags": ["x", "y"], "kind": "bb", "opt": null, "child": {"x": true, "next": {"x": false, "next": null}}, "any": [1, {"k": "v"}]}`, -1, true},
		{`{"opt": -2.5e3, "name": "", "age": 0}`, -1, true},
		{`{"name": "A"}`, 12, false},              // age is required
		{`{"nme": 1}`, 3, false},                  // not a property
		{`{"nam": 1}`, 5, false},                  // nor a prefix of one
		{`{"name": "A", "name": "B"}`, 15, false}, // once each
		{`{"name": 1}`, 9, false},                 // a string
		{`{"age": 3.5}`, 9, false},                // an integer
		{`{"age": 1e3}`, 9, false},                // the same
		{`{"tags": ["a", "b", "c"]}`, 18, false},  // two items at most
		{`{"tags": [1]}`, 10, false},              // items are strings
		{`{"kind": "c"}`, 10, false},              // one of the enum
		{`{"kind": "b"}`, 11, false},              // the whole of one
		{`{"opt": "s"}`, 8, false},                // a number or null
		{`{"child": {}}`, 11, false},              // x is required
		{`{"child": {"x": 1}}`, 16, false},        // a boolean
		{`{"name": "A", "age": 3, "any": {"z": [null]}}`, -1, true},
		{`{"name": "A", "age": 3, }`, 24, false},
		{`{"name": "A", "age": 3, "child": {"x": true, "next": 39}}`, 53, false}, // a Child or null
		{`{"name": "A", "age": 3, "child": {"x": true, "next": {"x": 1}}}`, 59, false},
	}
	for _, c := range cases {
		j := NewSchemaJSON(s)
		taken := len(c.text)
		for i := 0; i < len(c.text); i++ {
			if !j.Feed(c.text[i]) {
				taken = i
				break
			}
		}
		want := c.taken
		if want < 0 {
			want = len(c.text)
		}
		if taken != want || j.Done() != c.done {
			t.Errorf("%s: took %d bytes (%q), done %v; want %d, %v", c.text, taken, c.text[:taken], j.Done(), want, c.done)
		}
	}

	// Every property taken: no comma after the last.
	j := NewSchemaJSON(s)
	full := `{"name": "A", "age": 3, "tags": [], "kind": "a", "opt": 1, "child": {"x": true}, "any": 0`
	if !j.FeedString(full) || j.Feed(',') || !j.Feed('}') || !j.Done() {
		t.Errorf("after every property: a comma taken, or the end refused")
	}
}

// walk feeds text to a walk of schema and returns how many bytes it took
// and whether the object is whole.
func walk(t *testing.T, schema, text string) (int, bool) {
	t.Helper()
	s, err := ParseSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	j := NewSchemaJSON(s)
	for i := 0; i < len(text); i++ {
		if !j.Feed(text[i]) {
			return i, false
		}
	}
	return len(text), j.Done()
}

func TestSchemaCases(t *testing.T) {
	const node = `{"$defs": {"N": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}, "required": ["v"]}}, "$ref": "#/$defs/N"}`
	const nullableEnum = `{"type": "object", "properties": {"e": {"type": ["string", "null"], "enum": ["x", "y"]}, "f": {"enum": ["x", null]}}}`
	cases := []struct {
		schema, text string
		taken        int
		done         bool
	}{
		{node, `{"v": 1, "next": {"v": 2, "next": null}}`, -1, true},
		{node, `{"v": 1, "next": 5}`, 17, false},
		{node, `{"v": 1, "next": {"v": "x"}}`, 23, false},
		{nullableEnum, `{"e": "y", "f": null}`, -1, true},
		{nullableEnum, `{"e": null}`, 6, false},
		{nullableEnum, `{"f": "x"}`, -1, true},
		// null written in other words beside the schema
		{`{"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": ["null"], "description": "none"}]}}}`, `{"a": null}`, -1, true},
		{`{"type": "object", "properties": {"a": {"oneOf": [{"const": null}, {"type": "integer"}]}}}`, `{"a": 7}`, -1, true},
		{`{"type": "object", "additionalProperties": false}`, `{}`, -1, true},
		{`{"type": "object", "additionalProperties": false}`, `{"zz": 1}`, 1, false},
		{`{"type": "object"}`, `{"zz": [1, {"a": null}]}`, -1, true},
		// recursion with a way out: an optional property, an array that may be empty, a string beside an object
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": ["object", "string"], "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, `{"a": {"a": "x"}}`, -1, true},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/O"}}, "$defs": {"O": {"type": "object", "properties": {"a": {"$ref": "#/$defs/O"}}}}}`, `{"a": {}}`, -1, true},
		{`{"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}, "required": ["kids"], "$defs": {"T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}, "required": ["kids"]}}}`, `{"kids": [{"kids": []}]}`, -1, true},
	}
	for _, c := range cases {
		taken, done := walk(t, c.schema, c.text)
		want := c.taken
		if want < 0 {
			want = len(c.text)
		}
		if taken != want || done != c.done {
			t.Errorf("%s on %s: took %d bytes (%q), done %v; want %d, %v", c.text, c.schema, taken, c.text[:taken], done, want, c.done)
		}
	}
}

func TestParseSchemaRefuses(t *testing.T) {
	cases := []struct{ schema, says string }{
		{`{"type": "array", "items": {}}`, "must describe an object"},
		{`{"type": "object", "properties": {"a": {"allOf": [{}]}}}`, "a: allOf is not supported"},
		{`{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`, "more than one schema besides null"},
		{`{"type": "object", "additionalProperties": true}`, "additionalProperties other than false"},
		{`{"type": "object", "properties": {"a": {"enum": [1, 2]}}}`, "values other than strings"},
		{`{"type": "object", "properties": {"a": {"type": "integer", "enum": ["x"]}}}`, "no enum value is of the type"},
		{`{"type": "object", "properties": {"a": {"const": "x", "enum": ["x", "y"]}}}`, "enum with const"},
		{`{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}], "type": "integer"}}}`, "anyOf with other keywords"},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/S", "type": "integer"}}, "$defs": {"S": {"type": "string"}}}`, "$ref with other keywords"},
		{`{"type": "object", "properties": {"a": null}}`, "a: not a schema object"},
		{`{"type": "object", "properties": {"a": {}, "a": {}}}`, `"a" is there twice`},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}`, "refers to itself"},
		{strings.Repeat(`{"type": "object", "properties": {"a": `, 70) + `{}` + strings.Repeat(`}}`, 70), "nests deeper than 64"},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}`, `$ref "#/$defs/Missing" is not under $defs`},
		{`{"type": "object", "properties": {"a": {}}, "required": ["b"]}`, `required names "b"`},
		{`{"type": "object", "properties": {"a\"b": {}}}`, "needs escapes"},
		{`{"type": "object", "properties": {"a": {"type": "text"}}}`, `type "text" is not a JSON type`},
		{`[1]`, "not a JSON object"},
		// read no further than the 65th property (not to the 20001st, a second p0)
		{`{"type": "object", "properties": {` + manyProps(20000) + `, "p0": {}}}`, "more than 64 properties"},
		// no finite value: what is required comes back to itself
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"], "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, "no finite JSON value"},
		{`{"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "required": ["n"], "$defs": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}, "minItems": 1}}, "required": ["kids"]}}}`, "no finite JSON value"},
		// a dead part the answer could still enter: optional, in items that may be empty, beside null, beside a string
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, `required property "a" leads back`},
		{`{"type": "object", "properties": {"l": {"type": "array", "items": {"$ref": "#/$defs/A"}}}, "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, "no finite JSON value"},
		{`{"type": "object", "properties": {"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}, "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, "no finite JSON value"},
		{`{"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}, "B": {"type": ["object", "string"], "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]}}}`, `required property "a" leads back`},
	}
	for _, c := range cases {
		if _, err := ParseSchema(json.RawMessage(c.schema)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.schema, err, c.says)
		}
	}
}

// manyProps is n properties "p0": {}, "p1": {}, ...
func manyProps(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("%q: {}", fmt.Sprint("p", i))
	}
	return strings.Join(ps, ", ")
}

// valid is an independent check of a decoded value against a schema, for
// the fuzz test: what the walk takes whole must be valid.
func valid(v any, s *Schema) bool {
	if s == nil {
		return true
	}
	if s.alias != nil {
		return (v == nil && s.nullable) || valid(v, s.alias)
	}
	var t typeSet
	switch x := v.(type) {
	case nil:
		t = tNull
	case bool:
		t = tBool
	case json.Number:
		t = tNumber
		if !strings.ContainsAny(string(x), ".eE") {
			t = tInteger
		}
	case string:
		t = tString
		if s.enum != nil && !slices.Contains(s.enum, x) {
			return false
		}
	case []any:
		t = tArray
		if len(x) < s.minItems || (s.maxItems >= 0 && len(x) > s.maxItems) {
			return false
		}
		for _, e := range x {
			if !valid(e, s.items) {
				return false
			}
		}
	case map[string]any:
		t = tObject
		if s.props != nil {
			for i, p := range s.props {
				if _, ok := x[p.name]; !ok && s.required&(1<<i) != 0 {
					return false
				}
			}
			for k, e := range x {
				i := s.prop(k)
				if i < 0 || !valid(e, s.props[i].s) {
					return false
				}
			}
		}
	}
	switch {
	case s.types == tAny:
		return true
	case t == tInteger:
		return s.types&(tInteger|tNumber) != 0
	}
	return s.types&t != 0
}

func FuzzParseSchema(f *testing.F) {
	f.Add(personSchema, `{"name": "A", "age": 3}`)
	f.Add(personSchema, `{"name": "A", "age": 3, "child": {"x": true, "next": {"x": false, "next": null}}, "kind": "bb"}`)
	f.Add(`{"$defs": {"N": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}, "required": ["v"]}}, "$ref": "#/$defs/N"}`, `{"v": 1, "next": {"v": 2, "next": null}}`)
	f.Fuzz(func(t *testing.T, schema, text string) {
		s, err := ParseSchema(json.RawMessage(schema))
		if err != nil {
			return
		}
		j := NewSchemaJSON(s)
		if !j.FeedString(text) || !j.Done() {
			return
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil || !valid(v, s) {
			t.Fatalf("%s took %s, which is not valid (%v)", schema, text, err)
		}
	})
}
