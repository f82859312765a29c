package chat

import (
	"encoding/json"
	"testing"
)

func TestParseToolDef(t *testing.T) {
	for _, c := range []struct {
		raw, name, err string
	}{
		{`{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object"}}}`, "get_weather", ""},
		{` {"type":"function","function":{"name":"f"}}`, "f", ""},
		{`null`, "", `must be an object {"type": "function", "function": {"name": ...}}`},
		{`[]`, "", `must be an object {"type": "function", "function": {"name": ...}}`},
		{`"get_weather"`, "", `must be an object {"type": "function", "function": {"name": ...}}`},
		{`{"type": 5, "function": {"name": "f"}}`, "f", `must be an object {"type": "function", "function": {"name": ...}}`},
		{`{"function": {"name": "f"}}`, "f", `type must be "function"`},
		{`{"type": "tool", "function": {"name": "f"}}`, "f", `type must be "function"`},
		{`{"type": "function"}`, "", "function.name is missing"},
		{`{"type": "function", "function": {"name": ""}}`, "", "function.name is missing"},
		{`{"type": "function", "function": "f"}`, "", `must be an object {"type": "function", "function": {"name": ...}}`},
	} {
		got, err := ParseToolDef(json.RawMessage(c.raw))
		if msg := errString(err); msg != c.err || got.Function.Name != c.name {
			t.Errorf("ParseToolDef(%s) = name %q, error %q; want %q, %q", c.raw, got.Function.Name, msg, c.name, c.err)
		}
	}
	d, err := ParseToolDef(json.RawMessage(`{"type":"function","function":{"name":"f","description":"Gets it.","parameters":{"b":1,"a":2}}}`))
	if err != nil || d.Function.Description != "Gets it." || string(d.Function.Parameters) != `{"b":1,"a":2}` {
		t.Errorf("ParseToolDef kept description %q and parameters %s (%v); want them as sent", d.Function.Description, d.Function.Parameters, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
