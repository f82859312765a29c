// Package server serves a loaded model over HTTP: the OpenAI API
// (/v1/chat/completions, /v1/completions, /v1/models), the Ollama API
// (/api/chat, /api/generate, /api/tags, /api/show, /api/version), /health,
// Prometheus /metrics, and a chat page at /.
//
// The model runs one sequence at a time, so generations take turns through a
// bounded first-come-first-served queue; a full queue answers 429 (503 on the Ollama API). The cache
// keeps the last sequence, and a request whose prompt starts with it (the
// next turn of a chat) only prefills the new part.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/constrain"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/tokenizer"
)

// Model is what the server serves.
type Model struct {
	Name string // the name clients see and send
	// Net runs one sequence at a time; one that can Truncate its cache
	// reuses the prefix a prompt shares with the last one (engine.Session).
	Net       engine.Model
	Tokenizer *tokenizer.Tokenizer
	Template  *chat.Template
	Info      Info
}

// Info describes the model for /api/tags, /api/show and /v1/models.
type Info struct {
	Path          string
	Size          int64 // file bytes
	Modified      time.Time
	Family        string // general.architecture
	ParameterSize string // "16B"
	Quantization  string // the weight type holding the most bytes: "Q4_K"
	// Metadata holds the file's scalar metadata (Ollama's model_info).
	Metadata map[string]any
}

// Config configures a Server.
type Config struct {
	Model  *Model
	APIKey string // when set, requests other than /, /health and the page's files need "Authorization: Bearer APIKey"
	// QueueSize is how many requests may wait for the model while one
	// generates (0: 64); one more gets 429.
	QueueSize int
	// DrainTimeout bounds how long Serve waits for requests in flight after
	// its context ends before cancelling them (0: 10 s).
	DrainTimeout time.Duration
	// WriteTimeout bounds each write of a streamed answer, so that a client
	// that stops reading cannot hold the model (0: 30 s).
	WriteTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body (0: 1 min).
	BodyTimeout time.Duration
	Version     string       // reported by /api/version
	Log         *slog.Logger // nil: discard
}

// Server answers the HTTP APIs for one model.
type Server struct {
	cfg     Config
	model   *Model
	queue   *queue
	session *engine.Session // only the request holding the queue uses it
	metrics *metrics
	log     *slog.Logger
	started time.Time
	mux     *http.ServeMux

	// base is the parent of every request's context: cancelling it ends
	// the generations still running when a drain runs out of time.
	base       context.Context
	cancelBase context.CancelFunc

	// what the model's chat template says: the syntax of its tool calls,
	// whether it shows the model the tools offered (it names them at all),
	// whether it thinks; and the vocabulary indexed for constrained
	// answers, made at the first request that needs it
	toolSyntax *chat.ToolSyntax
	showsTools bool
	thinks     bool
	vocab      func() *constrain.Vocab

	mu       sync.Mutex
	stopped  bool           // Serve is waiting for inflight: no new generations
	inflight sync.WaitGroup // generations waiting for the model or running
}

// New makes a server for cfg.Model.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil || cfg.Model.Net == nil || cfg.Model.Tokenizer == nil || cfg.Model.Template == nil {
		return nil, errors.New("server: a model with its network, tokenizer and chat template is required")
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 64
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = time.Minute
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		model:   cfg.Model,
		queue:   newQueue(cfg.QueueSize),
		session: engine.NewSession(cfg.Model.Net),
		log:     log,
		started: time.Now(),

		toolSyntax: chat.DetectToolSyntax(cfg.Model.Template.Source),
		showsTools: strings.Contains(cfg.Model.Template.Source, "tools"),
		thinks:     strings.Contains(cfg.Model.Template.Source, chat.ThinkOpen),
		vocab:      sync.OnceValue(func() *constrain.Vocab { return constrain.NewVocab(cfg.Model.Tokenizer) }),
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.metrics = newMetrics(s.queue)
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	s.mux = m
	api := func(pattern, name string, h http.HandlerFunc) {
		m.Handle(pattern, s.instrument(name, s.authorize(h)))
	}
	api("POST /v1/chat/completions", "chat_completions", s.handleChatCompletions)
	api("POST /v1/completions", "completions", s.handleCompletions)
	api("GET /v1/models", "models", s.handleModels)
	api("GET /v1/models/{id...}", "models", s.handleModel)
	api("POST /api/chat", "ollama_chat", s.handleOllamaChat)
	api("POST /api/generate", "ollama_generate", s.handleOllamaGenerate)
	api("GET /api/tags", "ollama_tags", s.handleOllamaTags)
	api("POST /api/show", "ollama_show", s.handleOllamaShow)
	api("GET /api/version", "ollama_version", s.handleOllamaVersion)
	api("GET /api/ps", "ollama_ps", s.handleOllamaPS)
	api("GET /metrics", "metrics", s.metrics.handler().ServeHTTP)
	m.Handle("GET /health", s.instrument("health", http.HandlerFunc(s.handleHealth)))
	m.Handle("/", s.instrument("page", pageHandler()))
	// Unknown API paths and wrong methods answer in the API's error format.
	m.Handle("/v1/", s.instrument("unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		openAIErrors.write(w, &apiError{status: http.StatusNotFound, kind: "not_found_error", msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})))
	m.Handle("/api/", s.instrument("unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ollamaErrors.write(w, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})))
}

// ServeHTTP answers one request. Browsers may call the API from any origin
// (as llama.cpp's server allows); the API key, when set, still applies.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		// whatever headers the page's client sends (openai-node adds
		// X-Stainless-*); a wildcard would not cover Authorization
		allow := r.Header.Get("Access-Control-Request-Headers")
		if allow == "" {
			allow = "Authorization, Content-Type"
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorize checks the bearer token when the server has an API key.
func (s *Server) authorize(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte(s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), want) != 1 { // the scheme is case-insensitive (RFC 9110)
			w.Header().Set("WWW-Authenticate", `Bearer realm="latent"`)
			e := &apiError{status: http.StatusUnauthorized, kind: "authentication_error", code: "invalid_api_key",
				msg: "missing or wrong API key: send the header Authorization: Bearer KEY"}
			f := openAIErrors
			if strings.HasPrefix(r.URL.Path, "/api/") {
				f = ollamaErrors
			}
			f.write(w, e)
			return
		}
		h(w, r)
	}
}

// Serve answers requests on ln until ctx ends, then stops accepting, lets
// the requests in flight finish for up to DrainTimeout, cancels those still
// running, and returns once no generation uses the model. It returns nil
// after a drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// A body shorter than its Content-Length would otherwise hold its
		// connection for ever; the server clears the deadline once a body
		// is read, so it does not cut a long answer's stream.
		ReadTimeout: s.cfg.BodyTimeout,
		IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return s.base },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.stopGenerations()
		return err
	case <-ctx.Done():
	}

	s.log.Info("draining", "waiting", s.queue.depth(), "generating", s.queue.busy(), "bound", s.cfg.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	if err := hs.Shutdown(dctx); err != nil {
		s.log.Warn("drain bound reached: cancelling the requests in flight")
		// Cancelling ends generations at their next token; closing the
		// connections frees those blocked writing to a client that stopped
		// reading.
		s.cancelBase()
		if err := hs.Close(); err != nil {
			s.log.Debug("closing the connections", "err", err)
		}
	}
	s.stopGenerations()
	<-errc // http.ErrServerClosed
	return nil
}

// stopGenerations cancels the generations still running and waits for them:
// a forward pass under way (a long prefill) runs to its end, and the caller
// may free the model once Serve returns.
func (s *Server) stopGenerations() {
	s.cancelBase()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.inflight.Wait()
}

// begin registers a generation with Serve's final wait; it is false once
// Serve no longer waits, and then the generation must not run.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status":      "ok",
		"model":       s.model.Name,
		"queue_depth": s.queue.depth(),
		"busy":        s.queue.busy(),
	})
}
