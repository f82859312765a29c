package constrain

import (
	"encoding/json"
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

func TestParseSchemaRefuses(t *testing.T) {
	cases := []struct{ schema, says string }{
		{`{"type": "array", "items": {}}`, "must describe an object"},
		{`{"type": "object", "properties": {"a": {"allOf": [{}]}}}`, "a: allOf is not supported"},
		{`{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`, "more than one schema besides null"},
		{`{"type": "object", "additionalProperties": true}`, "additionalProperties other than false"},
		{`{"type": "object", "properties": {"a": {"enum": [1, 2]}}}`, "values other than strings"},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}`, `$ref "#/$defs/Missing" is not under $defs`},
		{`{"type": "object", "properties": {"a": {}}, "required": ["b"]}`, `required names "b"`},
		{`{"type": "object", "properties": {"a\"b": {}}}`, "needs escapes"},
		{`{"type": "object", "properties": {"a": {"type": "text"}}}`, `type "text" is not a JSON type`},
		{`[1]`, "not a JSON object"},
	}
	for _, c := range cases {
		if _, err := ParseSchema(json.RawMessage(c.schema)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.schema, err, c.says)
		}
	}
}

func FuzzParseSchema(f *testing.F) {
	f.Add(personSchema, `{"name": "A", "age": 3}`)
	f.Fuzz(func(t *testing.T, schema, text string) {
		s, err := ParseSchema(json.RawMessage(schema))
		if err != nil {
			return
		}
		j := NewSchemaJSON(s)
		if j.FeedString(text) && j.Done() && !json.Valid([]byte(text)) {
			t.Fatalf("%q took %q, which is not JSON", schema, text)
		}
	})
}
