package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
)

// Any prompt is either refused with a 400 naming the prompt, or read as
// text or token ids; valid JSON is read only in one of OpenAI's shapes: a
// string, token ids, or a list holding one of those.
func FuzzParsePrompt(f *testing.F) {
	for _, s := range []string{`"hi"`, `[1,2,3]`, `["hi"]`, `[[1,2]]`, `[["hi"]]`, `[[["hi"]]]`, `["a","b"]`, `[]`, `""`, `[""]`,
		`[[]]`, `null`, ` `, `{"a":1}`, `[1,"a"]`, `[-1]`, `[2147483648]`, `[-0]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var gen genRequest
		err := parsePrompt(json.RawMessage(s), &gen)
		if err != nil {
			var e *apiError
			if !errors.As(err, &e) || e.status != http.StatusBadRequest || e.param != "prompt" {
				t.Fatalf("%q: error %v, want a 400 about the prompt", s, err)
			}
			return
		}
		if (gen.prompt != "") == (len(gen.tokens) > 0) {
			t.Fatalf("%q: read as text %q and tokens %v", s, gen.prompt, gen.tokens)
		}
		data := []byte(s)
		if !json.Valid(data) { // a request's prompt field always is; others need only not to panic
			return
		}
		if gen.prompt != "" {
			var one string
			var list []string
			if !(json.Unmarshal(data, &one) == nil && one == gen.prompt || json.Unmarshal(data, &list) == nil && len(list) == 1 && list[0] == gen.prompt) {
				t.Fatalf("%q: read as the text %q, which is neither it nor its one element", s, gen.prompt)
			}
			return
		}
		var one []int32
		var list [][]int32
		if !(json.Unmarshal(data, &one) == nil && slices.Equal(one, gen.tokens) || json.Unmarshal(data, &list) == nil && len(list) == 1 && slices.Equal(list[0], gen.tokens)) {
			t.Fatalf("%q: read as the tokens %v, which are neither it nor its one element", s, gen.tokens)
		}
	})
}
