package constrain

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// feed feeds s to a fresh recognizer: how many bytes it took, and whether the object is whole.
func feed(s string) (int, bool) {
	var j JSON
	for i := 0; i < len(s); i++ {
		if !j.Feed(s[i]) {
			return i, false
		}
	}
	return len(s), j.Done()
}

func TestJSON(t *testing.T) {
	cases := []struct {
		text  string
		taken int // bytes accepted; -1: all
		done  bool
	}{
		{`{}`, -1, true},
		{` {}`, 0, false}, // nothing before it, not even space
		{`{"a": 1, "b": [true, false, null, -0.5e+3, "x\"\u00e9\n"], "c": {"d": []}}`, -1, true},
		{`{"a":1}`, -1, true},
		{`{"a": "café"}`, -1, true},
		{`{"a": 1`, -1, false},        // a prefix: more to come
		{`{"a": 12.`, -1, false},      // a number may go on
		{`[1]`, 0, false},             // the answer is an object
		{`"text"`, 0, false},          // the same
		{`Sure! {}`, 0, false},        // nothing before it
		{`{}}`, 2, false},             // nothing after it
		{`{} `, 2, false},             // not even space
		{`{"a": 01}`, 7, false},       // no leading zeros
		{`{"a": tru}`, 9, false},      // literals whole
		{`{"a": 1,}`, 8, false},       // no trailing comma
		{`{a: 1}`, 1, false},          // keys are strings
		{`{"a" 1}`, 5, false},         // a colon after a key
		{`{"a": "b` + "\n", 8, false}, // control characters escaped
		{`{"a": "\x"}`, 8, false},     // only JSON's escapes
		{`{"a": "\u12G4"}`, 11, false},
		{"{\"a\": \"\xe4\"}", 8, false},                        // a character cut short
		{"{\"a\": \"\xff\"}", 7, false},                        // not UTF-8
		{"{\"a\": \"\xed\xa0\x80\"}", 8, false},                // a surrogate
		{"{\"a\": \"\xc0\xaf\"}", 7, false},                    // an overlong form
		{"{\"\xf0\x9f\x98\x80\": \"\xe4\xb8\xad\"}", -1, true}, // four and three bytes
		{`{"a": [}`, 7, false},                                 // brackets match
		{`{"a": -}`, 7, false},
		{`{"a": 1e}`, 8, false},
		{"{\"a\":\n" + strings.Repeat("\t", MaxIndent) + `1}`, -1, true},
		{"{\"a\":\n" + strings.Repeat(" ", MaxIndent+1) + `1}`, 6 + MaxIndent, false},
		{`{"a":  1}`, 6, false},             // one space
		{"{\"a\": \n1}", 6, false},          // or a newline, not both
		{"{\"a\":\n\n1}", 6, false},         // one newline
		{"{\"a\":\r\n1}", 5, false},         // no carriage return
		{"{\"a\":\n  \"b   c\"}", -1, true}, // spaces in a string are its text
		{`{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`, -1, true},
		{`{"a":` + strings.Repeat("[", MaxDepth), 5 + MaxDepth - 1, false},
	}
	for _, c := range cases {
		taken, done := feed(c.text)
		want := c.taken
		if want < 0 {
			want = len(c.text)
		}
		if taken != want || done != c.done {
			t.Errorf("%q: took %d bytes, done %v; want %d, %v", c.text, taken, done, want, c.done)
		}
	}
}

// FuzzJSON holds the recognizer to encoding/json: a text it takes whole is valid JSON, an object, and
// a valid object within its limits it takes whole.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, 2.5e-3, "x\u0041", {"b": null}], "c": true}`, `{"a": 01}`, `[1]`, `{"a": "\q"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Count(s, "{")+strings.Count(s, "[") > MaxDepth {
			return // past the limits
		}
		_, done := feed(s)
		want := json.Valid([]byte(s)) && utf8.ValidString(s) && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && grammarSpace(s)
		if done != want {
			t.Fatalf("%q: whole %v, encoding/json says %v", s, done, want)
		}
	})
}

// grammarSpace reports whether every run of whitespace outside the strings
// of s, a valid JSON text, is one space or a newline and at most MaxIndent
// spaces or tabs.
var llamaSpace = regexp.MustCompile(`^( |\n[ \t]{0,20})$`)

func grammarSpace(s string) bool {
	inString, escaped, run := false, false, ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case isSpace(c):
			run += string(c)
			continue
		case c == '"':
			inString = true
		}
		if run != "" && !llamaSpace.MatchString(run) {
			return false
		}
		run = ""
	}
	return run == "" || llamaSpace.MatchString(run)
}
