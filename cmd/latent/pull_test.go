package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latent-ai/latent/hub"
	"github.com/latent-ai/latent/hub/hubtest"
)

// fakeHubEnv serves two tiny golden models as the repository tiny/models-GGUF
// on a local fake Hub, and points HF_ENDPOINT and LATENT_MODELS at it and at
// a fresh store.
func fakeHubEnv(t *testing.T) (*hubtest.Server, string, map[string][]byte) {
	t.Helper()
	data := map[string][]byte{}
	var files []hubtest.File
	for name, golden := range map[string]string{"tiny-Q4_K_M.gguf": "tiny-glm-q4_k_m.gguf", "tiny-Q4_0.gguf": "tiny-youtu-q4_0.gguf"} {
		b, err := os.ReadFile(filepath.Join(goldenDir, "models", golden))
		if err != nil {
			t.Fatal(err)
		}
		data[name] = b
		files = append(files, hubtest.File{Path: name, Data: b})
	}
	s := hubtest.New(t, map[string][]hubtest.File{"tiny/models-GGUF": files})
	store := t.TempDir()
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("LATENT_MODELS", store)
	return s, store, data
}

func TestPullListRm(t *testing.T) {
	s, store, data := fakeHubEnv(t)

	// Inspecting a model the store lacks does not download it.
	for _, args := range [][]string{{"show", "tiny/models-GGUF"}, {"tokenize", "tiny/models-GGUF", "--text", "hi"}} {
		if _, err := runLatent(t, args...); err == nil || !strings.Contains(err.Error(), "not in the model store; download it with: latent pull hf.co/tiny/models-GGUF") {
			t.Errorf("%s before the pull: %v", args[0], err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("show and tokenize asked the Hub %d times", n)
	}

	out, err := runLatent(t, "pull", "hf.co/tiny/models-GGUF")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store, "hf.co", "tiny", "models-GGUF", "tiny-Q4_K_M.gguf")
	for _, want := range []string{
		"pulling hf.co/tiny/models-GGUF: tiny-Q4_K_M.gguf (3.9 MB, default Q4_K_M)",
		"pulling tiny-Q4_K_M.gguf  100% 3.9 MB/3.9 MB",
		"pulled hf.co/tiny/models-GGUF:Q4_K_M (default Q4_K_M, 3.9 MB, sha256 verified): " + path,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pull output lacks %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data["tiny-Q4_K_M.gguf"]) {
		t.Fatal("pulled file differs from the Hub's")
	}
	// The pulled file is a model the other commands read, by path or by name.
	if out, err := runLatent(t, "show", path); err != nil || !strings.Contains(out, "architecture   deepseek2") {
		t.Errorf("show of the pulled file: %v\n%s", err, out)
	}
	if out, err := runLatent(t, "show", "tiny/models-GGUF"); err != nil || !strings.Contains(out, "architecture   deepseek2") {
		t.Errorf("show of the pulled model: %v\n%s", err, out)
	}
	byPath, err := runLatent(t, "tokenize", path, "--text", "func main() {}")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runLatent(t, "tokenize", "hf.co/tiny/models-GGUF:Q4_K_M", "--text", "func main() {}"); err != nil || out != byPath {
		t.Errorf("tokenize by name: %v\n%s\nby path:\n%s", err, out, byPath)
	}

	out, err = runLatent(t, "pull", "tiny/models-GGUF:q4_k_m")
	if err != nil || !strings.Contains(out, "hf.co/tiny/models-GGUF:Q4_K_M is up to date: "+path) {
		t.Errorf("second pull: %v\n%s", err, out)
	}

	// A cut connection mid-file is resumed within the same pull.
	s.Cut("tiny-Q4_0.gguf", 500_000)
	out, err = runLatent(t, "pull", "hf.co/tiny/models-GGUF:Q4_0")
	if err != nil || !strings.Contains(out, "the connection closed after 500 kB of 1.4 MB; resuming at 500 kB") || !strings.Contains(out, "pulled hf.co/tiny/models-GGUF:Q4_0") {
		t.Errorf("pull through a cut connection: %v\n%s", err, out)
	}
	if gets := s.Downloads("tiny-Q4_0.gguf"); len(gets) != 2 || gets[1].Range != "bytes=500000-" {
		t.Errorf("GETs %+v, want the second from byte 500000", gets)
	}

	out, err = runLatent(t, "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.HasPrefix(lines[1], "hf.co/tiny/models-GGUF:Q4_0      1.4 MB    Less than a minute ago") ||
		!strings.HasPrefix(lines[2], "hf.co/tiny/models-GGUF:Q4_K_M    3.9 MB    Less than a minute ago") {
		t.Errorf("list:\n%s", out)
	}
	out, err = runLatent(t, "list", "--json")
	var listed []hub.Local
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 || listed[1].Path != path || listed[1].SHA256 != hubtest.SHA256(data["tiny-Q4_K_M.gguf"]) {
		t.Errorf("list --json: %v\n%s", err, out)
	}
	var keys []map[string]any // the keys its help names, as jq would ask for them
	if json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 2 {
		t.Fatalf("list --json:\n%s", out)
	}
	for _, k := range []string{"name", "path", "size", "modified", "sha256"} {
		if _, ok := keys[0][k]; !ok {
			t.Errorf("list --json lacks %q: %v", k, keys[0])
		}
	}

	if _, err := runLatent(t, "rm", "hf.co/tiny/models-GGUF"); err == nil || !strings.Contains(err.Error(), "2 models of this repository are stored; name one") {
		t.Errorf("ambiguous rm: %v", err)
	}
	out, err = runLatent(t, "rm", "hf.co/tiny/models-GGUF:Q4_K_M", "tiny/models-GGUF:Q4_0")
	if err != nil || strings.Count(out, "deleted ") != 4 || !strings.Contains(out, "deleted "+path+"\n") {
		t.Errorf("rm: %v\n%s", err, out)
	}
	if out, err := runLatent(t, "list"); err != nil || !strings.Contains(out, "no models in "+store) {
		t.Errorf("list after rm: %v\n%s", err, out)
	}
	if _, err := runLatent(t, "rm", "hf.co/tiny/models-GGUF:Q4_0"); err == nil || !strings.Contains(err.Error(), "not in the model store") {
		t.Errorf("rm of a removed model: %v", err)
	}
}

func TestPullErrors(t *testing.T) {
	_, _, _ = fakeHubEnv(t)
	local := filepath.Join(goldenDir, "models", "tiny-youtu-q4_0.gguf")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pull", "hf.co/tiny/models-GGUF:Q8_0"}, `hf.co/tiny/models-GGUF:Q8_0 has no GGUF file for quantization "Q8_0"; available: Q4_K_M, Q4_0`},
		{[]string{"pull", "hf.co/nobody/nothing-GGUF"}, "hf.co/nobody/nothing-GGUF: no such model repository on 127.0.0.1:"},
		{[]string{"pull", "llama3"}, `model reference "llama3": not a known model name`},
		{[]string{"pull", local}, "is a local file: pull takes a model name"},
		{[]string{"pull"}, "give a model: latent pull MODEL"},
		{[]string{"rm", "./model.gguf"}, "./model.gguf: rm removes models from the store"},
		{[]string{"list", "extra"}, "unknown command"},
	}
	for _, tc := range tests {
		_, err := runLatent(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("latent %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second:     "Less than a minute ago",
		time.Minute:          "1 minute ago",
		5 * time.Minute:      "5 minutes ago",
		time.Hour:            "An hour ago",
		49 * time.Hour:       "2 days ago",
		65 * 24 * time.Hour:  "2 months ago",
		800 * 24 * time.Hour: "2 years ago",
	} {
		if got := ago(d); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}
