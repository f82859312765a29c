package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus series, in a registry of its own.
type metrics struct {
	reg             *prometheus.Registry
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	promptTokens    prometheus.Counter
	cachedTokens    prometheus.Counter
	generatedTokens prometheus.Counter
	rejected        prometheus.Counter
	inflight        prometheus.Gauge
	ttft            prometheus.Histogram
	tokensPerSecond prometheus.Histogram
}

func newMetrics(q *queue) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latent_requests_total", Help: "HTTP requests answered, by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "latent_request_duration_seconds", Help: "Time to answer a request completely, streams included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
	}, []string{"endpoint"})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "latent_prompt_tokens_total", Help: "Prompt tokens of finished generations (cached ones included).",
	})
	m.cachedTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "latent_prompt_tokens_cached_total", Help: "Prompt tokens reused from the previous request's cache instead of prefilled.",
	})
	m.generatedTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "latent_generated_tokens_total", Help: "Tokens generated.",
	})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "latent_queue_rejected_total", Help: "Requests refused because the queue was full (429; 503 on the Ollama API).",
	})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "latent_requests_in_flight", Help: "Generation requests waiting or running.",
	})
	queueDepth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "latent_queue_depth", Help: "Requests waiting for the model.",
	}, func() float64 { return float64(q.depth()) })
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "latent_time_to_first_token_seconds", Help: "Time from a request's arrival to its first streamed text, queueing included.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
	m.tokensPerSecond = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "latent_tokens_per_second", Help: "Decode speed of each generation (tokens after the first, per second).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	m.reg.MustRegister(m.requests, m.duration, m.promptTokens, m.cachedTokens, m.generatedTokens, m.rejected,
		m.inflight, queueDepth, m.ttft, m.tokensPerSecond)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// instrument counts a request and its status code once it is answered.
func (s *Server) instrument(endpoint string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(rec.status)).Inc()
		s.metrics.duration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
	})
}

// statusRecorder remembers the status code; Unwrap lets
// http.ResponseController reach the connection for flushes and deadlines.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
