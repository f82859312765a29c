package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-ai/latent/hub/hubtest"
)

const goldenModels = "../../shared/golden/models"

// golden reads a tiny model file: real GGUF bytes to serve.
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenModels, name))
	if err != nil {
		t.Fatalf("%v (../shared must sit beside the repository)", err)
	}
	return b
}

// fakeHub serves one repository, tiny/youtu-GGUF, with three quantizations.
func fakeHub(t *testing.T) (*hubtest.Server, map[string][]byte) {
	data := map[string][]byte{
		"tiny-youtu-Q4_0.gguf":   golden(t, "tiny-youtu-q4_0.gguf"),
		"tiny-glm-Q4_K_M.gguf":   golden(t, "tiny-glm-q4_k_m.gguf"),
		"q8/tiny-dsv2-Q8_0.gguf": golden(t, "tiny-dsv2-q8_0.gguf"),
	}
	var files []hubtest.File
	for p, b := range data {
		files = append(files, hubtest.File{Path: p, Data: b})
	}
	files = append(files, hubtest.File{Path: "README.md", Data: []byte("# tiny\n")})
	return hubtest.New(t, map[string][]hubtest.File{"tiny/models-GGUF": files}), data
}

func testOptions(t *testing.T, s *hubtest.Server) Options {
	return Options{Dir: t.TempDir(), Endpoint: s.URL, retryDelay: time.Millisecond, stall: 5 * time.Second}
}

// storeFiles lists every file under the store, relative to it.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

func TestPullDefaultQuant(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	var log bytes.Buffer
	opts.Progress = &log
	p, err := Pull(context.Background(), "hf.co/tiny/models-GGUF", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(opts.Dir, "hf.co", "tiny", "models-GGUF", "tiny-glm-Q4_K_M.gguf")
	if p.Path != want || p.Name != "hf.co/tiny/models-GGUF:Q4_K_M" || p.Chosen != "default Q4_K_M" || p.UpToDate {
		t.Errorf("pulled %+v", p)
	}
	got, err := os.ReadFile(p.Path)
	if err != nil || !bytes.Equal(got, data["tiny-glm-Q4_K_M.gguf"]) {
		t.Fatalf("stored file differs from the Hub's (%v)", err)
	}
	sum, _ := os.ReadFile(p.Path + ".sha256")
	if string(sum) != hubtest.SHA256(got)+"  tiny-glm-Q4_K_M.gguf\n" {
		t.Errorf(".sha256 file holds %q", sum)
	}
	if files := storeFiles(t, opts.Dir); len(files) != 2 {
		t.Errorf("store holds %v, want the model and its .sha256", files)
	}
	for _, want := range []string{"pulling hf.co/tiny/models-GGUF: tiny-glm-Q4_K_M.gguf (3.9 MB, default Q4_K_M)", "100%"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
	// The download went through the Hub's redirect to the CDN.
	var hubResolve, cdnGet bool
	for _, r := range s.Requests() {
		hubResolve = hubResolve || !r.CDN && r.Method == "HEAD" && strings.HasSuffix(r.Path, "/resolve/main/tiny-glm-Q4_K_M.gguf")
		cdnGet = cdnGet || r.CDN && r.Method == "GET" && r.Range == ""
	}
	if !hubResolve || !cdnGet {
		t.Errorf("requests %+v lack the Hub's HEAD or the CDN's GET", s.Requests())
	}

	// Pulling again checks the Hub and downloads nothing.
	before := len(s.Downloads("tiny-glm-Q4_K_M.gguf"))
	p2, err := Pull(context.Background(), "tiny/models-GGUF:q4_k_m", opts)
	if err != nil || !p2.UpToDate || p2.Path != want {
		t.Fatalf("second pull: %+v, %v", p2, err)
	}
	if n := len(s.Downloads("tiny-glm-Q4_K_M.gguf")); n != before {
		t.Errorf("second pull downloaded again (%d GETs)", n-before)
	}

	// Resolve finds it in the store without asking the Hub.
	n := len(s.Requests())
	path, err := Resolve(context.Background(), "hf.co/tiny/models-GGUF", opts)
	if err != nil || path != want {
		t.Fatalf("Resolve = %q, %v; want %q", path, err, want)
	}
	if len(s.Requests()) != n {
		t.Errorf("Resolve of a stored model asked the Hub")
	}
}

// Find answers from the store alone: a stored model's file, a path as it
// is, and for a model the store lacks an error that says to pull it.
func TestFind(t *testing.T) {
	s, _ := fakeHub(t)
	opts := testOptions(t, s)
	if _, err := Find("hf.co/tiny/models-GGUF:Q8_0", opts); err == nil ||
		err.Error() != "hf.co/tiny/models-GGUF:Q8_0: not in the model store; download it with: latent pull hf.co/tiny/models-GGUF:Q8_0" {
		t.Errorf("Find before the pull: %v", err)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("Find asked the Hub %d times", len(s.Requests()))
	}
	want, err := Resolve(context.Background(), "tiny/models-GGUF:q8_0", opts)
	if err != nil {
		t.Fatal(err)
	}
	n := len(s.Requests())
	if p, err := Find("tiny/models-GGUF:Q8_0", opts); err != nil || p != want {
		t.Errorf("Find after the pull = %q, %v; want %q", p, err, want)
	}
	if p, err := Find(want, Options{Dir: t.TempDir()}); err != nil || p != want {
		t.Errorf("Find(path) = %q, %v", p, err)
	}
	if _, err := Find(filepath.Join(t.TempDir(), "absent.gguf"), opts); err == nil || !strings.Contains(err.Error(), "absent.gguf: no such model file") {
		t.Errorf("Find(missing path) = %v", err)
	}
	if len(s.Requests()) != n {
		t.Errorf("Find asked the Hub")
	}
}

func TestResolvePullsOnFirstUse(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	path, err := Resolve(context.Background(), "hf.co/tiny/models-GGUF:Q8_0", opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(opts.Dir, "hf.co", "tiny", "models-GGUF", "q8", "tiny-dsv2-Q8_0.gguf"); path != want {
		t.Fatalf("Resolve = %q, want %q", path, want)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data["q8/tiny-dsv2-Q8_0.gguf"]) {
		t.Fatal("stored file differs from the Hub's")
	}
	// A path is a path, whatever the store holds.
	if p, err := Resolve(context.Background(), path, Options{Dir: t.TempDir(), Endpoint: "http://127.0.0.1:1"}); err != nil || p != path {
		t.Errorf("Resolve(path) = %q, %v", p, err)
	}
	if _, err := Resolve(context.Background(), filepath.Join(t.TempDir(), "absent.gguf"), opts); err == nil || !strings.Contains(err.Error(), "absent.gguf: no such model file") {
		t.Errorf("Resolve(missing path) = %v", err)
	}
}

func TestPullResumesCutConnection(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	const file = "tiny-youtu-Q4_0.gguf"
	s.Cut(file, 300_000, 500_000) // two cuts, then the rest in full
	p, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p.Path); !bytes.Equal(got, data[file]) {
		t.Fatal("resumed file differs from the Hub's")
	}
	gets := s.Downloads(file)
	var ranges []string
	for _, g := range gets {
		ranges = append(ranges, g.Range)
	}
	if strings.Join(ranges, ",") != ",bytes=300000-,bytes=800000-" {
		t.Errorf("GETs asked for ranges %q, want none, then from 300000, then from 800000", ranges)
	}
}

func TestPullInterruptedLeavesResumablePartial(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	opts.retries = -1 // fail at the first cut, as a dropped network would end a run
	const file = "tiny-youtu-Q4_0.gguf"
	s.Cut(file, 400_000)
	_, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts)
	if err == nil || !strings.Contains(err.Error(), "the connection closed after 400 kB of 1.4 MB") || !strings.Contains(err.Error(), "pull again to resume") {
		t.Fatalf("cut pull: %v", err)
	}
	sha := hubtest.SHA256(data[file])
	part := filepath.Join(opts.Dir, "hf.co", "tiny", "models-GGUF", file+"."+sha[:12]+".partial")
	if st, err := os.Stat(part); err != nil || st.Size() != 400_000 {
		t.Fatalf("partial: %v (want 400000 bytes in %s)", err, part)
	}
	if files := storeFiles(t, opts.Dir); len(files) != 1 {
		t.Errorf("store holds %v, want only the partial", files)
	}
	if l, err := List(opts); err != nil || len(l) != 0 {
		t.Errorf("List shows %v, %v for a partial download", l, err)
	}
	if _, err := Resolve(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", Options{Dir: opts.Dir, Endpoint: "http://127.0.0.1:1", retries: -1}); err == nil {
		t.Error("Resolve offline took a partial download for a model")
	}

	// The next pull asks for the rest only.
	p, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.Resumed != 400_000 {
		t.Errorf("Resumed = %d, want 400000", p.Resumed)
	}
	gets := s.Downloads(file)
	if len(gets) != 2 || gets[1].Range != "bytes=400000-" {
		t.Fatalf("GETs %+v, want a second one with Range bytes=400000-", gets)
	}
	if got, _ := os.ReadFile(p.Path); !bytes.Equal(got, data[file]) {
		t.Fatal("resumed file differs from the Hub's")
	}
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("partial still there after the pull: %v", err)
	}
}

// cancelAfter cancels a pull once progress passes a tenth, as Ctrl-C would.
type cancelAfter struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	log    bytes.Buffer
}

func (c *cancelAfter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Write(b)
	if bytes.Contains(b, []byte("%")) {
		c.cancel()
	}
	return len(b), nil
}

func TestPullCancelledThenResumed(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelAfter{cancel: cancel}
	opts.Progress = w
	_, err := Pull(ctx, "hf.co/tiny/models-GGUF:Q8_0", opts)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("cancelled pull: %v, want ErrInterrupted", err)
	}
	files := storeFiles(t, opts.Dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], ".partial") {
		t.Fatalf("store holds %v, want one .partial", files)
	}
	st, _ := os.Stat(filepath.Join(opts.Dir, files[0]))
	have := st.Size()
	if have == 0 || have >= int64(len(data["q8/tiny-dsv2-Q8_0.gguf"])) {
		t.Fatalf("partial holds %d bytes", have)
	}
	opts.Progress = nil
	p, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q8_0", opts)
	if err != nil {
		t.Fatal(err)
	}
	gets := s.Downloads("q8/tiny-dsv2-Q8_0.gguf")
	if last := gets[len(gets)-1]; last.Range != "bytes="+strconv.FormatInt(have, 10)+"-" {
		t.Errorf("resuming GET asked for %q, want bytes=%d-", last.Range, have)
	}
	if got, _ := os.ReadFile(p.Path); !bytes.Equal(got, data["q8/tiny-dsv2-Q8_0.gguf"]) {
		t.Fatal("resumed file differs from the Hub's")
	}
}

func TestPullWrongChecksum(t *testing.T) {
	data := golden(t, "tiny-youtu-q4_0.gguf")
	s := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_0.gguf", Data: data, Corrupt: true}}})
	opts := testOptions(t, s)
	_, err := Pull(context.Background(), "hf.co/o/r", opts)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), hubtest.SHA256(data)) {
		t.Fatalf("corrupt download: %v", err)
	}
	if files := storeFiles(t, opts.Dir); len(files) != 0 {
		t.Errorf("store keeps %v after a corrupt download", files)
	}
}

func TestPullNotGGUF(t *testing.T) {
	s := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_0.gguf", Data: bytes.Repeat([]byte("not gguf"), 1000)}}})
	opts := testOptions(t, s)
	_, err := Pull(context.Background(), "hf.co/o/r:Q4_0", opts)
	if err == nil || !strings.Contains(err.Error(), "not a usable GGUF model (deleted)") {
		t.Fatalf("non-GGUF download: %v", err)
	}
	if files := storeFiles(t, opts.Dir); len(files) != 0 {
		t.Errorf("store keeps %v", files)
	}
}

func TestPullErrors(t *testing.T) {
	s, _ := fakeHub(t)
	opts := testOptions(t, s)
	tests := []struct{ ref, want string }{
		{"hf.co/tiny/absent-GGUF", "hf.co/tiny/absent-GGUF: no such model repository on 127.0.0.1:"},
		{"hf.co/tiny/models-GGUF:Q2_K", `hf.co/tiny/models-GGUF:Q2_K has no GGUF file for quantization "Q2_K"; available: Q4_K_M, Q4_0, Q8_0`},
		{"hf.co/tiny/models-GGUF/absent.gguf", "no file absent.gguf in the repository"},
		{"nonsense", `model reference "nonsense": not a known model name`},
	}
	for _, tc := range tests {
		_, err := Pull(context.Background(), tc.ref, opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pull(%q) = %v, want %q", tc.ref, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Pull(%q) error spans lines: %q", tc.ref, err)
		}
	}
	if _, err := Pull(context.Background(), "hf.co/tiny/models-GGUF", Options{Dir: t.TempDir(), Endpoint: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
		t.Errorf("bad endpoint: %v", err)
	}
}

func TestPullFileMissingOnHub(t *testing.T) {
	// The listing names a file the resolve endpoint does not serve.
	s, _ := fakeHub(t)
	opts := testOptions(t, s)
	cl, err := newClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.head(context.Background(), Ref{Owner: "tiny", Repo: "models-GGUF"}, "gone.gguf")
	if err == nil || !strings.Contains(err.Error(), "hf.co/tiny/models-GGUF: gone.gguf: file not found on 127.0.0.1:") {
		t.Errorf("head of a missing file: %v", err)
	}
}

func TestPullDiskTooSmall(t *testing.T) {
	s := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_K_M.gguf", Data: []byte("GGUF"), ReportSize: 1 << 60}}})
	opts := testOptions(t, s)
	_, err := Pull(context.Background(), "hf.co/o/r", opts)
	if err == nil || !strings.Contains(err.Error(), "not enough disk space for m-Q4_K_M.gguf: it needs 1.2 EB more") {
		t.Fatalf("pull of an exabyte: %v", err)
	}
	if n := len(s.Downloads("m-Q4_K_M.gguf")); n != 0 {
		t.Errorf("refused pull still downloaded (%d GETs)", n)
	}
}

func TestPullTokenGoesToHubOnly(t *testing.T) {
	s, _ := fakeHub(t)
	s.Token = "hf_secret"
	opts := testOptions(t, s)
	if _, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts); err == nil || !strings.Contains(err.Error(), "if it is private or gated, set HF_TOKEN") {
		t.Fatalf("pull without the token: %v", err)
	}
	t.Setenv("HF_TOKEN", "hf_secret")
	if _, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Requests() {
		if r.CDN && r.Authorization != "" {
			t.Errorf("the token went to the CDN: %+v", r)
		}
		if !r.CDN && r.Authorization != "" && r.Authorization != "Bearer hf_secret" {
			t.Errorf("Hub got Authorization %q", r.Authorization)
		}
	}
	if got := s.Requests()[len(s.Requests())-2]; got.CDN || got.Authorization != "Bearer hf_secret" {
		t.Errorf("the Hub's HEAD went without the token: %+v", got)
	}
}

func TestPullPagedListing(t *testing.T) {
	s, _ := fakeHub(t)
	s.PageSize = 1
	opts := testOptions(t, s)
	p, err := Pull(context.Background(), "hf.co/tiny/models-GGUF", opts)
	if err != nil || p.Name != "hf.co/tiny/models-GGUF:Q4_K_M" {
		t.Fatalf("paged pull: %+v, %v", p, err)
	}
	pages := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Path, "/api/models/") {
			pages++
		}
	}
	if pages < 5 {
		t.Errorf("listed in %d pages, want one per entry", pages)
	}
}

func TestPullReplacesUpdatedFile(t *testing.T) {
	old := golden(t, "tiny-youtu-q4_0.gguf")
	s := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_0.gguf", Data: old}}})
	opts := testOptions(t, s)
	if _, err := Pull(context.Background(), "hf.co/o/r", opts); err != nil {
		t.Fatal(err)
	}
	// A new revision on the Hub: same name, new bytes; an old partial of
	// another revision lies around too.
	updated := golden(t, "tiny-glm-q4_0.gguf")
	s2 := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_0.gguf", Data: updated}}})
	opts.Endpoint = s2.URL
	final := filepath.Join(opts.Dir, "hf.co", "o", "r", "m-Q4_0.gguf")
	stale := final + ".0123456789ab.partial"
	os.WriteFile(stale, []byte("old"), 0o644)
	p, err := Pull(context.Background(), "hf.co/o/r", opts)
	if err != nil || p.UpToDate {
		t.Fatalf("pull of an updated file: %+v, %v", p, err)
	}
	if got, _ := os.ReadFile(final); !bytes.Equal(got, updated) {
		t.Error("stored file is not the new revision")
	}
	if storedSum(final) != hubtest.SHA256(updated) {
		t.Error(".sha256 not updated")
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Error("stale partial of another revision kept")
	}
}

func TestListAndRemove(t *testing.T) {
	s, data := fakeHub(t)
	opts := testOptions(t, s)
	for _, ref := range []string{"hf.co/tiny/models-GGUF", "hf.co/tiny/models-GGUF:Q8_0"} {
		if _, err := Pull(context.Background(), ref, opts); err != nil {
			t.Fatal(err)
		}
	}
	l, err := List(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Name != "hf.co/tiny/models-GGUF:Q4_K_M" || l[1].Name != "hf.co/tiny/models-GGUF:Q8_0" {
		t.Fatalf("List = %+v", l)
	}
	if l[1].Size != int64(len(data["q8/tiny-dsv2-Q8_0.gguf"])) || l[1].SHA256 != hubtest.SHA256(data["q8/tiny-dsv2-Q8_0.gguf"]) || time.Since(l[1].Modified) > time.Minute {
		t.Errorf("List entry %+v", l[1])
	}
	// Every listed name resolves, offline, to its file.
	for _, m := range l {
		p, err := Resolve(context.Background(), m.Name, Options{Dir: opts.Dir, Endpoint: "http://127.0.0.1:1"})
		if err != nil || p != m.Path {
			t.Errorf("Resolve(%q) = %q, %v; want %q", m.Name, p, err, m.Path)
		}
	}

	// A partial download of a third quantization.
	opts.retries = -1
	s.Cut("tiny-youtu-Q4_0.gguf", 1000)
	if _, err := Pull(context.Background(), "hf.co/tiny/models-GGUF:Q4_0", opts); err == nil {
		t.Fatal("cut pull succeeded")
	}

	if _, err := Remove("hf.co/tiny/models-GGUF", opts); err == nil || !strings.Contains(err.Error(), "2 models of this repository are stored; name one: hf.co/tiny/models-GGUF:Q4_K_M, hf.co/tiny/models-GGUF:Q8_0") {
		t.Errorf("ambiguous rm: %v", err)
	}
	removed, err := Remove("tiny/models-GGUF:q8_0", opts)
	if err != nil || len(removed) != 2 || !strings.HasSuffix(removed[0], "tiny-dsv2-Q8_0.gguf") || !strings.HasSuffix(removed[1], ".sha256") {
		t.Fatalf("rm Q8_0: %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, "hf.co", "tiny", "models-GGUF", "q8")); !errors.Is(err, os.ErrNotExist) {
		t.Error("rm left an empty directory")
	}
	if removed, err := Remove("hf.co/tiny/models-GGUF:Q4_0", opts); err != nil || len(removed) != 1 || !strings.HasSuffix(removed[0], ".partial") {
		t.Errorf("rm of a partial download: %v, %v", removed, err)
	}
	if _, err := Remove("hf.co/tiny/models-GGUF:Q8_0", opts); err == nil || !strings.Contains(err.Error(), "hf.co/tiny/models-GGUF:Q8_0: not in the model store") {
		t.Errorf("rm of an absent model: %v", err)
	}
	// Now one model is left, so the bare repository names it.
	if removed, err := Remove("hf.co/tiny/models-GGUF", opts); err != nil || len(removed) != 2 {
		t.Errorf("rm last: %v, %v", removed, err)
	}
	if files := storeFiles(t, opts.Dir); len(files) != 0 {
		t.Errorf("store holds %v after removing everything", files)
	}
	if _, err := Remove("./model.gguf", opts); err == nil || !strings.Contains(err.Error(), "never files by path") {
		t.Error("rm of a path outside the store succeeded")
	}
}

func TestStoreDir(t *testing.T) {
	t.Setenv("LATENT_MODELS", "/models/here")
	if d, _ := StoreDir(Options{}); d != "/models/here" {
		t.Errorf("StoreDir with LATENT_MODELS = %q", d)
	}
	if d, _ := StoreDir(Options{Dir: "/x"}); d != "/x" {
		t.Errorf("StoreDir with Dir = %q", d)
	}
	t.Setenv("LATENT_MODELS", "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if d, _ := StoreDir(Options{}); d != filepath.Join("/cache", "latent", "models") {
		t.Errorf("default StoreDir = %q", d)
	}
}

func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, "m.gguf", 1000, 0)
	for i := 0; i < 100; i++ {
		p.Write(make([]byte, 10))
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 10 || !strings.HasPrefix(lines[9], "pulling m.gguf  100% 1.0 kB/1.0 kB") {
		t.Errorf("progress on a pipe printed %d lines:\n%s", len(lines), b.String())
	}
	if strings.Contains(b.String(), "\r") {
		t.Error("progress on a pipe redraws in place")
	}
}

func TestPullRefusesFileAnotherPullHolds(t *testing.T) {
	data := golden(t, "tiny-youtu-q4_0.gguf")
	s := hubtest.New(t, map[string][]hubtest.File{"o/r": {{Path: "m-Q4_0.gguf", Data: data}}})
	opts := testOptions(t, s)
	dir := filepath.Join(opts.Dir, "hf.co", "o", "r")
	os.MkdirAll(dir, 0o755)
	f, err := os.Create(partialName(filepath.Join(dir, "m-Q4_0.gguf"), hubtest.SHA256(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := lockFile(f); err != nil {
		t.Fatal(err)
	}
	_, err = Pull(context.Background(), "hf.co/o/r", opts)
	if err == nil || !strings.Contains(err.Error(), "m-Q4_0.gguf is being downloaded by another latent process") {
		t.Errorf("pull of a locked partial: %v", err)
	}
	f.Close() // as the other process ending
	if _, err := Pull(context.Background(), "hf.co/o/r", opts); err != nil {
		t.Errorf("pull after the lock is gone: %v", err)
	}
}

func TestProgressBar(t *testing.T) {
	p := newProgress(nil, "m.gguf", 4000, 1000)
	p.start = time.Now().Add(-2 * time.Second)
	p.add(1000)
	line := p.line(time.Now(), 10)
	if !regexp.MustCompile(`^pulling m\.gguf   50% ▕█████     ▏ 2\.0 kB/4\.0 kB  (499|500) B/s  4s left$`).MatchString(line) {
		t.Errorf("bar line %q", line)
	}
}
