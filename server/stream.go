package server

import (
	"encoding/json"
	"net/http"
	"time"
)

// stream writes a streamed answer: server-sent events (OpenAI) or one JSON
// object a line (Ollama), flushed after each, each write bounded in time so
// that a client that stops reading frees the model.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	timeout time.Duration
	started bool
}

func newStream(w http.ResponseWriter, sse bool, timeout time.Duration) *stream {
	return &stream{w: w, rc: http.NewResponseController(w), sse: sse, timeout: timeout}
}

func (s *stream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	if s.sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

// send writes one event or line.
func (s *stream) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(b)
}

func (s *stream) raw(b []byte) error {
	s.start()
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	var out []byte
	if s.sse {
		out = append(append(append(out, "data: "...), b...), "\n\n"...)
	} else {
		out = append(append(out, b...), '\n')
	}
	if _, err := s.w.Write(out); err != nil {
		return err
	}
	return s.rc.Flush()
}

// done ends an SSE stream as OpenAI does.
func (s *stream) done() error {
	return s.raw([]byte("[DONE]"))
}
