package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a command's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingAt = regexp.MustCompile(`on http://([0-9.:]+)/`)

// startServe runs `latent serve` in-process and returns its address, its
// output, and a channel with its result.
func startServe(t *testing.T, ctx context.Context, args ...string) (string, *syncBuffer, <-chan error) {
	t.Helper()
	root := newRootCmd()
	out := &syncBuffer{}
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append([]string{"serve"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if m := servingAt.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, done
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v\n%s", err, out)
		default:
		}
	}
	t.Fatalf("serve did not start:\n%s", out)
	return "", nil, nil
}

// waitStopped waits for serve to return, without an error.
func waitStopped(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// readmeServe returns the commands of the README's Serve section: the
// serve command, and the curl commands.
func readmeServe(t *testing.T) (serve []string, curls []string) {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Serve\n")
	if !ok {
		t.Fatal("README.md has no Serve section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, line := range strings.Split(section, "\n") {
		cmd, ok := strings.CutPrefix(line, "    ")
		switch {
		case !ok:
		case strings.HasPrefix(cmd, "go run ./cmd/latent serve "):
			serve = strings.Fields(strings.TrimPrefix(cmd, "go run ./cmd/latent serve "))
		case strings.HasPrefix(cmd, "curl "):
			curls = append(curls, cmd)
		}
	}
	if serve == nil || len(curls) < 5 {
		t.Fatalf("README's Serve section: serve %q, %d curl commands", serve, len(curls))
	}
	return serve, curls
}

// TestReadmeServeExamples runs the README's serve command on a freshly
// synthesized tiny model and its curl commands against it, as written but
// for the model's path and the port.
func TestReadmeServeExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's examples (.ci/run installs it)")
	}
	serveArgs, curls := readmeServe(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny-glm.gguf")
	if out, err := runLatent(t, "synth", "--preset", "tiny-glm", "-o", model); err != nil {
		t.Fatalf("synth: %v\n%s", err, out)
	}
	for i, a := range serveArgs {
		if a == "/tmp/tiny-glm.gguf" {
			serveArgs[i] = model
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, out, done := startServe(t, ctx, append(serveArgs, "--port", "0", "--ctx", "512")...)

	for _, c := range curls {
		cmd := strings.ReplaceAll(c, "localhost:11434", addr)
		t.Run(c[:min(len(c), 60)], func(t *testing.T) {
			res, err := exec.Command("bash", "-o", "pipefail", "-c", cmd).CombinedOutput()
			if err != nil {
				t.Fatalf("%s\n%v\n%s", c, err, res)
			}
			body := string(res)
			switch {
			case strings.Contains(c, `"stream": true`):
				if !strings.Contains(body, "data: {") || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"usage"`) {
					t.Errorf("%s\nnot an SSE stream with usage:\n%s", c, body)
				}
			case strings.Contains(c, "/metrics"):
				for _, m := range []string{"latent_requests_total", "latent_generated_tokens_total", "latent_queue_depth"} {
					if !strings.Contains(body, m) {
						t.Errorf("metrics lack %s:\n%s", m, body)
					}
				}
			case strings.Contains(c, "/api/chat"): // NDJSON, ending done
				lines := strings.Split(strings.TrimSpace(body), "\n")
				var last map[string]any
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["done"] != true || last["eval_count"] == nil {
					t.Errorf("%s\nlast line %q: %v", c, lines[len(lines)-1], err)
				}
			default:
				var v map[string]any
				if err := json.Unmarshal(res, &v); err != nil {
					t.Fatalf("%s\nnot JSON: %v\n%s", c, err, body)
				}
				if v["error"] != nil {
					t.Errorf("%s\nerror: %s", c, body)
				}
			}
		})
	}

	cancel()
	waitStopped(t, done)
	if !strings.Contains(out.String(), "latent: stopped") {
		t.Errorf("no stop message:\n%s", out)
	}
}

func TestServeStopsOnSIGTERM(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	model := filepath.Join(goldenDir, "models", "tiny-youtu-q4_0.gguf")
	_, out, done := startServe(t, context.Background(), model, "--port", "0", "--ctx", "128", "--drain", "2s")
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, done)
	if !strings.Contains(out.String(), "draining") || !strings.Contains(out.String(), "latent: stopped") {
		t.Errorf("output:\n%s", out)
	}
}

func TestServeErrors(t *testing.T) {
	model := filepath.Join(goldenDir, "models", "tiny-youtu-q4_0.gguf")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "/nonexistent/model.gguf", "--port", "0"}, "/nonexistent/model.gguf"},
		{[]string{"serve", model, "--port", "70000"}, "--port 70000 is not a TCP port"},
		{[]string{"serve", model, "--queue", "0"}, "--queue 0"},
		{[]string{"serve", model, "--drain", "-1s"}, "--drain -1s: give a positive duration"},
		{[]string{"serve", model, "--host", "256.1.1.1", "--port", "0"}, "listen on 256.1.1.1:0"},
		{[]string{"serve"}, "give a model: latent serve MODEL"},
	}
	for _, tc := range tests {
		_, err := runLatent(t, tc.args...)
		checkError(t, fmt.Sprint("latent ", tc.args), err, tc.want)
	}
}
