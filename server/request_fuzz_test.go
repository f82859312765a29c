package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// Whatever body a client posts to a generating endpoint, the server answers
// 200 or a 4xx with the API's error object, never a 5xx, and keeps serving.
func FuzzRequestBodies(f *testing.F) {
	paths := []string{"/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate"}
	seeds := []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`,
		`{"prompt":"hi","max_tokens":2}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":2}}`,
		`{"prompt":"hi","stream":false,"options":{"num_predict":2}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":1,"stop":["x"]}`,
		`{"prompt":[[1,2]],"max_tokens":1}`, `{"prompt":"hi","raw":true,"stream":false,"options":{"num_predict":1,"top_k":-3}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"temperature":1e309}`, `{`, `[]`, ``, `null`,
	}
	for i, s := range seeds {
		f.Add(uint8(i%len(paths)), s)
	}
	m := goldenModel(f, "tiny-glm-f32.gguf", 64)
	ts := startServer(f, Config{Model: m})
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := paths[int(which)%len(paths)]
		resp, raw := post(t, ts.url+path, body)
		switch {
		case resp.StatusCode == 200:
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			var e map[string]any
			if err := json.Unmarshal(raw, &e); err != nil || e["error"] == nil {
				t.Fatalf("POST %s %q: %d without an error object: %s", path, body, resp.StatusCode, raw)
			}
		default:
			t.Fatalf("POST %s %q: status %d: %s", path, body, resp.StatusCode, raw)
		}
		if strings.Contains(string(raw), "goroutine ") {
			t.Fatalf("POST %s %q: a stack trace in the answer: %s", path, body, raw)
		}
	})
}
