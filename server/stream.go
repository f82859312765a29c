package server

import (
	"encoding/json"
	"errors"
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
	err     error // the write that failed: the client is gone or stuck
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
	if s.err != nil {
		return s.err
	}
	s.start()
	var out []byte
	if s.sse {
		out = append(append(append(out, "data: "...), b...), "\n\n"...)
	} else {
		out = append(append(out, b...), '\n')
	}
	// A writer with no connection under it has no deadline to set, and no
	// client that could stall it.
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return err
	}
	if _, s.err = s.w.Write(out); s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err
}

// done ends an SSE stream as OpenAI does.
func (s *stream) done() error {
	return s.raw([]byte("[DONE]"))
}
