package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/model"
)

const goldenModels = "../../shared/golden/models"

// goldenModel loads a golden tiny model with a small context.
func goldenModel(t testing.TB, file string, ctx int) *Model {
	t.Helper()
	m, lm, err := Load(filepath.Join(goldenModels, file), "", model.Options{Context: ctx, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return m
}

// testServer is a server on a loopback port.
type testServer struct {
	*Server
	url  string
	stop func() // drains and waits for Serve to return
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	ts := &testServer{Server: srv, url: "http://" + ln.Addr().String()}
	ts.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(cfg.DrainTimeout + 10*time.Second):
				t.Errorf("Serve did not return after its drain")
			}
		})
	}
	t.Cleanup(ts.stop)
	return ts
}

// scriptedNet is a network whose every generated token is the next one of a
// script (then end of generation): a deterministic stand-in for a model that
// writes given text, reasoning tags included. Each forward pass may sleep, to
// act slow.
type scriptedNet struct {
	scripts [][]int32 // one per prefill, the last one repeated
	runs    int
	script  []int32
	eos     int32 // generated after the script; -1: repeat the script forever
	vocab   int
	ctx     int
	delay   time.Duration

	pos      int
	step     int // tokens generated since the prefill
	forwards atomic.Int64
	running  atomic.Int32 // forward passes under way
}

func newScriptedNet(m *Model, text string, ctx int) *scriptedNet {
	return &scriptedNet{scripts: [][]int32{m.Tokenizer.Encode(text, true)}, eos: m.Tokenizer.EOS(), vocab: m.Net.Vocab(), ctx: ctx, step: -1}
}

// then adds the script of the next request.
func (n *scriptedNet) then(m *Model, text string) *scriptedNet {
	n.scripts = append(n.scripts, m.Tokenizer.Encode(text, true))
	return n
}

func (n *scriptedNet) Forward(tokens []int32, all bool) ([]float32, error) {
	n.forwards.Add(1)
	n.running.Add(1)
	defer n.running.Add(-1)
	if n.delay > 0 {
		time.Sleep(n.delay)
	}
	if n.pos+len(tokens) > n.ctx {
		return nil, errors.New("context full")
	}
	// The first pass after a Reset or Truncate is the prompt's prefill: it
	// restarts the script. Later ones continue it.
	if n.step < 0 {
		n.step = 0
		n.script = n.scripts[min(n.runs, len(n.scripts)-1)]
		n.runs++
	} else {
		n.step++
	}
	n.pos += len(tokens)
	next := n.eos
	switch {
	case n.step < len(n.script):
		next = n.script[n.step]
	case n.eos < 0:
		next = n.script[n.step%len(n.script)]
	}
	rows := 1
	if all {
		rows = len(tokens)
	}
	logits := make([]float32, rows*n.vocab)
	logits[(rows-1)*n.vocab+int(next)] = 100
	return logits, nil
}

func (n *scriptedNet) Vocab() int     { return n.vocab }
func (n *scriptedNet) Context() int   { return n.ctx }
func (n *scriptedNet) Position() int  { return n.pos }
func (n *scriptedNet) Reset()         { n.pos, n.step = 0, -1 }
func (n *scriptedNet) Truncate(k int) { n.pos, n.step = min(n.pos, k), -1 }
func (n *scriptedNet) calls() int64   { return n.forwards.Load() }

// endlessNet repeats text forever, each token taking at least delay: a
// generation that lasts until something stops it.
func endlessNet(m *Model, text string, delay time.Duration) *scriptedNet {
	n := newScriptedNet(m, text, 1<<20)
	n.eos, n.delay = -1, delay
	return n
}

// on returns m running on the scripted network.
func (n *scriptedNet) on(m *Model) *Model {
	c := *m
	c.Net = n
	return &c
}

// withTemplate returns m with another chat template.
func withTemplate(t testing.TB, m *Model, src string) *Model {
	t.Helper()
	tmpl, err := chat.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	c := *m
	c.Template = tmpl
	return &c
}

// httpClient is a client whose requests cannot hang a test.
func httpClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second}
}

// post posts a JSON body and returns the response with its whole body.
func post(t testing.TB, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := httpClient().Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	return resp, raw
}

// postJSON posts body and decodes the answer into out, failing unless the
// status is want.
func postJSON(t testing.TB, url, body string, want int, out any) http.Header {
	t.Helper()
	resp, raw := post(t, url, body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s %s: status %d, want %d: %s", url, body, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: answer %q: %v", url, raw, err)
		}
	}
	return resp.Header
}

// postSSE posts body and returns the data of each server-sent event before
// the closing [DONE], which must come.
func postSSE(t testing.TB, url, body string) []string {
	t.Helper()
	resp, raw := post(t, url, body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST %s: status %d, type %q: %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var events []string
	for _, e := range strings.Split(string(raw), "\n\n") {
		if e == "" {
			continue
		}
		data, ok := strings.CutPrefix(e, "data: ")
		if !ok {
			t.Fatalf("not an SSE data event: %q", e)
		}
		if data == "[DONE]" {
			return events
		}
		events = append(events, data)
	}
	t.Fatalf("the stream did not end with data: [DONE]:\n%s", raw)
	return nil
}

// openStream posts body to a streaming endpoint and returns the response
// once its first event or line has arrived, with a reader of the rest.
func openStream(t *testing.T, ctx context.Context, url, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, err := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s (%v)", resp.StatusCode, b, err)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return resp, r
}

// chatAnswer is the part of a chat completion that tests read.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []any  `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func userMsg(text string) chat.Message { return chat.Message{Role: "user", Content: text} }
