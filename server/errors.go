package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// apiError is an error the client should see, with its HTTP status.
type apiError struct {
	status     int
	kind       string // OpenAI's error type: invalid_request_error, ...
	param      string // the request field at fault, if any
	code       string
	msg        string
	retryAfter int // seconds, for 429
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "invalid_request_error", param: param, msg: msg}
}

// asAPIError turns any error into the one the client sees; failures that are
// not the client's are 500s.
func asAPIError(err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	return &apiError{status: http.StatusInternalServerError, kind: "server_error", msg: err.Error()}
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) openAI() openAIError {
	body := openAIErrorBody{Message: e.msg, Type: e.kind}
	if body.Type == "" {
		body.Type = "invalid_request_error"
	}
	if e.param != "" {
		body.Param = &e.param
	}
	if e.code != "" {
		body.Code = &e.code
	}
	return openAIError{Error: body}
}

// errorFormat is how an API writes errors: OpenAI's error object, or
// Ollama's {"error": "..."}.
type errorFormat int

const (
	openAIErrors errorFormat = iota
	ollamaErrors
)

// body is e as the API writes it, as a response or as a stream's last event.
func (f errorFormat) body(e *apiError) any {
	if f == openAIErrors {
		return e.openAI()
	}
	msg := e.msg
	if e.param != "" && !strings.Contains(msg, e.param) {
		msg = e.param + ": " + msg
	}
	return map[string]string{"error": msg}
}

// write answers the request with err.
func (f errorFormat) write(w http.ResponseWriter, err error) {
	e := asAPIError(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	status := e.status
	if f == ollamaErrors && e.code == "queue_full" {
		status = http.StatusServiceUnavailable // what Ollama answers when its queue is full
	}
	writeJSON(w, status, f.body(e))
}

// failed answers a generation that ended before anything was written. A
// client that went away gets nothing.
func (s *Server) failed(w http.ResponseWriter, r *http.Request, err error, f errorFormat) {
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		s.log.Debug("client went away", "path", r.URL.Path)
		w.WriteHeader(499) // nginx's "client closed request", for the metrics
		return
	}
	if e := asAPIError(err); e.status >= 500 {
		s.log.Error("generation failed", "path", r.URL.Path, "err", err)
	}
	f.write(w, err)
}

// streamFailed ends a stream that failed: before it started, with an
// ordinary error response; after, with an error event. A client that went
// away, or stopped reading, gets nothing more.
func (s *Server) streamFailed(w http.ResponseWriter, r *http.Request, st *stream, err error, f errorFormat) {
	if !st.started {
		s.failed(w, r, err, f)
		return
	}
	if r.Context().Err() != nil || st.err != nil {
		s.log.Debug("client went away", "path", r.URL.Path, "err", err)
		return
	}
	s.log.Error("stream failed", "path", r.URL.Path, "err", err)
	if err := st.send(f.body(asAPIError(err))); err != nil {
		s.log.Debug("writing the error event failed", "path", r.URL.Path, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// A failed write means the client is gone: there is no one to tell.
	_, _ = w.Write(append(b, '\n'))
}

// maxBody bounds a request body (long conversations fit easily).
const maxBody = 32 << 20

// decodeBody reads a JSON request body into v, turning every way it can be
// wrong into a 400 that names the field. (Serve's ReadTimeout bounds the
// reading.)
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		// closed, the body is not drained before the answer (which would
		// wait for the bytes that did not come) and the connection closes
		_ = r.Body.Close()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, kind: "invalid_request_error", msg: fmt.Sprintf("the request body is larger than %d bytes", maxBody)}
		}
		return badRequest("", "reading the request body: "+err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request body is empty: send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("", "the request body holds more than one JSON value")
	}
	return nil
}

// jsonError explains a decoding error in the words of the request.
func jsonError(err error) *apiError {
	var (
		syn  *json.SyntaxError
		typ  *json.UnmarshalTypeError
		fe   *fieldError
		terr = err.Error()
	)
	switch {
	case errors.As(err, &fe):
		return badRequest(fe.field, fe.msg)
	case errors.As(err, &syn):
		return badRequest("", fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, syn.Error()))
	case errors.As(err, &typ):
		// The path names embedded structs too: keep the JSON names.
		field := strings.ReplaceAll(typ.Field, "openAISampling.", "")
		if field == "" {
			return badRequest("", fmt.Sprintf("the request body must be a JSON object, not %s", jsonKind(typ.Value)))
		}
		return badRequest(field, fmt.Sprintf("%s must be %s, not %s", field, goKind(typ.Type.String()), jsonKind(typ.Value)))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: the body ends in the middle of a value")
	}
	return badRequest("", "malformed JSON: "+strings.TrimPrefix(terr, "json: "))
}

// fieldError is a decoding error raised by a custom UnmarshalJSON.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func jsonKind(v string) string {
	switch v {
	case "bool":
		return "a boolean"
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	}
	if strings.HasPrefix(v, "number") {
		return "a number (" + strings.TrimPrefix(v, "number ") + ")"
	}
	return v
}

func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "struct"), strings.Contains(t, "."):
		return "an object"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return t
}
