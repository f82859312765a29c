package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/internal/units"
)

// Pulled describes a pull.
type Pulled struct {
	Local
	Ref      Ref    // the reference with the file it resolved to
	Chosen   string // why this file: "default Q4_K_M", "quantization Q8_0"
	UpToDate bool   // the store already held this exact file
	Resumed  int64  // bytes a previous, interrupted pull had left
}

// Pull resolves ref on the Hub and downloads the file into the store, unless
// the store already holds that exact file. An interrupted pull leaves a
// .partial file that the next pull of the same file resumes.
func Pull(ctx context.Context, ref string, opts Options) (*Pulled, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	return c.pull(ctx, r)
}

func (c *client) pull(ctx context.Context, r Ref) (*Pulled, error) {
	files, err := c.listFiles(ctx, r)
	if err != nil {
		return nil, err
	}
	m, why, err := choose(r, files)
	if err != nil {
		return nil, err
	}
	rf := m.Files[0]
	if !localPath(rf.Path) {
		return nil, fmt.Errorf("%s: the Hub lists a file with an unsafe path %q", r, rf.Path)
	}
	meta, err := c.head(ctx, r, rf.Path)
	if err != nil {
		return nil, err
	}
	sha := meta.SHA256
	if sha == "" {
		sha = rf.SHA256
	}
	if sha == "" {
		return nil, fmt.Errorf("%s: the Hub reports no SHA-256 for %s, so a download could not be verified", r, rf.Path)
	}
	size := meta.Size
	if size < 0 {
		size = rf.Size
	}
	if size <= 0 {
		return nil, fmt.Errorf("%s: the Hub reports no size for %s", r, rf.Path)
	}

	named := Ref{Owner: r.Owner, Repo: r.Repo, Alias: r.Alias, File: rf.Path}
	if m.Tag != "" {
		named.File, named.Quant = "", m.Tag
	}
	final := localFile(c.store, r, rf.Path)
	p := &Pulled{Ref: named, Chosen: why}
	if st, err := os.Stat(final); err == nil && st.Size() == size && storedSum(final) == sha {
		p.UpToDate = true
	} else {
		if c.progress != nil {
			fmt.Fprintf(c.progress, "pulling %s: %s (%s, %s)\n", r, rf.Path, units.Bytes(size), why)
		}
		if p.Resumed, err = c.download(ctx, meta.URL, final, rf.Path, sha, size); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(final)
	if err != nil {
		return nil, err
	}
	p.Local = Local{Name: named.String(), Path: final, Size: st.Size(), Modified: st.ModTime(), SHA256: sha}
	return p, nil
}

// storedSum is the checksum recorded beside a stored file, or "".
func storedSum(final string) string {
	b, err := os.ReadFile(final + ".sha256")
	if err != nil {
		return ""
	}
	sum, _, _ := strings.Cut(string(b), " ")
	return sum
}

// ErrInterrupted is wrapped by the error of a pull cut short by its context
// (Ctrl-C); the partial file stays for the next pull to resume.
var ErrInterrupted = errors.New("pull interrupted")

// download fetches url into final by way of a .partial file, resuming what an
// earlier attempt left, retrying cut connections from where they stopped,
// and renaming into place only after the SHA-256 and the GGUF header check
// out. It returns how many bytes it resumed from.
func (c *client) download(ctx context.Context, url, final, file, sha string, size int64) (resumed int64, err error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return 0, fmt.Errorf("model store: %w", err)
	}
	part := partialName(final, sha)
	removeStalePartials(final, part)
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("model store: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	if err := lockFile(f); err != nil {
		if errors.Is(err, errLocked) {
			return 0, fmt.Errorf("%s is being downloaded by another latent process (%s); wait for it to finish", file, part)
		}
		return 0, fmt.Errorf("lock %s: %w", part, err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	have := st.Size()
	if have > size {
		if err := f.Truncate(0); err != nil {
			return 0, err
		}
		have = 0
	}
	if free, ok := diskFree(filepath.Dir(final)); ok && uint64(size-have) > free {
		return 0, fmt.Errorf("not enough disk space for %s: it needs %s more, %s has %s free (set LATENT_MODELS to a roomier place)",
			file, units.Bytes(size-have), filepath.Dir(final), units.Bytes(int64(free)))
	}

	// The hash covers the bytes on disk: those of an earlier run first.
	h := sha256.New()
	if have > 0 {
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, have)); err != nil {
			return 0, fmt.Errorf("read %s: %w", part, err)
		}
	}
	resumed = have
	bar := newProgress(c.progress, filepath.Base(final), size, have)
	defer bar.finish()

	interrupted := func() error {
		return fmt.Errorf("%w: %s of %s kept in %s; pull again to resume", ErrInterrupted, units.Bytes(have), units.Bytes(size), part)
	}
	failures := 0
	for have < size {
		n, restart, err := c.fetch(ctx, url, f, h, bar, have, size)
		have += n
		if restart {
			// The server ignored the range: the file starts again from 0.
			have, resumed = n, 0
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return resumed, interrupted()
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return resumed, fmt.Errorf("download %s: %w", file, perm.error)
		}
		if n > 0 {
			failures = 0
		}
		failures++
		if failures > c.retries {
			return resumed, fmt.Errorf("download %s: %w (%s of %s kept in %s; pull again to resume)", file, err, units.Bytes(have), units.Bytes(size), part)
		}
		wait := c.retryDelay << min(failures-1, 5)
		if c.progress != nil && !bar.tty {
			fmt.Fprintf(c.progress, "download %s: %v; resuming at %s in %s\n", file, err, units.Bytes(have), wait)
		}
		select {
		case <-ctx.Done():
			return resumed, interrupted()
		case <-time.After(wait):
		}
	}

	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		f.Close()
		f = nil
		os.Remove(part)
		return resumed, fmt.Errorf("download %s: checksum mismatch: got sha256 %s, the Hub reports %s; the download was deleted, pull again", file, got, sha)
	}
	if err := f.Sync(); err != nil {
		return resumed, fmt.Errorf("model store: %w", err)
	}
	if err := f.Close(); err != nil {
		f = nil
		return resumed, fmt.Errorf("model store: %w", err)
	}
	f = nil
	g, err := gguf.Open(part)
	if err != nil {
		os.Remove(part)
		return resumed, fmt.Errorf("download %s: the file matches the Hub's checksum but is not a usable GGUF model (deleted): %w", file, err)
	}
	g.Close()
	// The old file's checksum goes first and the new one comes last, so that
	// a crash in between never leaves a file beside a checksum not its own
	// (which the next pull would take as up to date).
	if err := os.Remove(final + ".sha256"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return resumed, fmt.Errorf("model store: %w", err)
	}
	if err := os.Rename(part, final); err != nil {
		return resumed, fmt.Errorf("model store: %w", err)
	}
	if err := writeSum(final, sha); err != nil {
		return resumed, err
	}
	syncDir(filepath.Dir(final))
	return resumed, nil
}

var errLocked = errors.New("locked by another process")

// permanentError marks a failure that retrying will not mend.
type permanentError struct{ error }

// fetch makes one GET of url from byte have on, appending to f and h. It
// returns the bytes it appended; restart reports that the server sent the
// whole file instead of the range, so f and h were reset first.
func (c *client) fetch(ctx context.Context, url string, f *os.File, h hashWriter, bar *progress, have, size int64) (n int64, restart bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := c.request(ctx, http.MethodGet, url)
	if err != nil {
		return 0, false, permanentError{err}
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false, netErr(err, req.URL)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have || total >= 0 && total != size {
			return 0, false, permanentError{fmt.Errorf("the server answered range %d- with %q, for a file of %d bytes", have, resp.Header.Get("Content-Range"), size)}
		}
	case http.StatusOK:
		if resp.ContentLength >= 0 && resp.ContentLength != size {
			return 0, false, permanentError{fmt.Errorf("the server sends %d bytes, the Hub said %d", resp.ContentLength, size)}
		}
		if have > 0 {
			if err := f.Truncate(0); err != nil {
				return 0, false, permanentError{err}
			}
			h.Reset()
			bar.reset()
			restart = true
		}
		have = 0
	case http.StatusRequestedRangeNotSatisfiable:
		// The partial is no prefix of this file: start again.
		if err := f.Truncate(0); err != nil {
			return 0, false, permanentError{err}
		}
		h.Reset()
		bar.reset()
		return 0, true, errors.New("the server refused to resume (HTTP 416); starting again")
	default:
		err := fmt.Errorf("%s answered %s", req.URL.Host, resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
			return 0, false, err
		}
		// 403 from a CDN is usually an expired signed URL: a new pull
		// gets a fresh one and resumes.
		return 0, false, permanentError{fmt.Errorf("%w; pull again to resume", err)}
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, restart, permanentError{err}
	}
	// A watchdog cancels the request when no byte arrives for c.stall.
	stall := time.AfterFunc(c.stall, func() { cancel(fmt.Errorf("no data for %s", c.stall)) })
	defer stall.Stop()
	body := &watchdog{r: io.LimitReader(resp.Body, size-have), t: stall, d: c.stall}
	n, err = io.Copy(io.MultiWriter(f, h, bar), body)
	if err == nil && have+n < size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("the connection closed after %s of %s", units.Bytes(have+n), units.Bytes(size))
		}
	}
	return n, restart, err
}

// hashWriter is a hash that can start over.
type hashWriter interface {
	io.Writer
	Reset()
}

// watchdog pushes back a timer on every read that returns data.
type watchdog struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (w *watchdog) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.t.Reset(w.d)
	}
	return n, err
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*": -1).
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	a, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, total, true
}

// removeStalePartials deletes partial downloads of final other than keep:
// they hold an older revision of the file, which can never be resumed.
func removeStalePartials(final, keep string) {
	matches, _ := filepath.Glob(escapeGlob(final) + ".*.partial")
	for _, m := range matches {
		if m != keep {
			os.Remove(m)
		}
	}
}

// escapeGlob quotes the characters filepath.Match treats specially.
func escapeGlob(s string) string {
	if filepath.Separator == '\\' {
		// Backslash is the separator on Windows, not an escape.
		return strings.NewReplacer("*", "[*]", "?", "[?]", "[", "[[]").Replace(s)
	}
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// writeSum records a stored file's checksum as sha256sum writes it, so that
// `sha256sum -c FILE.sha256` checks the file.
func writeSum(final, sha string) error {
	tmp := final + ".sha256.tmp"
	if err := os.WriteFile(tmp, []byte(sha+"  "+filepath.Base(final)+"\n"), 0o644); err != nil {
		return fmt.Errorf("model store: %w", err)
	}
	if err := os.Rename(tmp, final+".sha256"); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("model store: %w", err)
	}
	return nil
}

// syncDir makes a rename in dir durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// CheckPath reports whether ref is a model file on disk, and an error when
// it names a local path that is not one (missing, or a directory), without
// touching the network: commands call it to report a bad path before
// anything else.
func CheckPath(ref string) (local bool, err error) {
	if st, err := os.Stat(ref); err == nil {
		if !st.Mode().IsRegular() {
			return false, fmt.Errorf("%s: not a GGUF file: not a regular file", ref)
		}
		return true, nil
	} else if looksLikePath(ref) {
		return false, fmt.Errorf("%s: no such model file", ref)
	}
	return false, nil
}

// Resolve returns the local path of the model ref names: a .gguf path as it
// is, or a file in the store, pulled from the Hub on first use with progress
// written to opts.Progress.
func Resolve(ctx context.Context, ref string, opts Options) (string, error) {
	p, r, err := find(ref, opts)
	if err != nil || p != "" {
		return p, err
	}
	c, err := newClient(opts)
	if err != nil {
		return "", err
	}
	pulled, err := c.pull(ctx, r)
	if err != nil {
		return "", err
	}
	return pulled.Path, nil
}

// Find is Resolve without a download: a reference that names a model the
// store lacks is an error that says how to pull it. Commands that only
// inspect a model use it, as ollama's show does.
func Find(ref string, opts Options) (string, error) {
	p, r, err := find(ref, opts)
	if err != nil || p != "" {
		return p, err
	}
	return "", fmt.Errorf("%s: not in the model store; download it with: latent pull %s", r, r)
}

// find is a path's file, or a reference's file in the store ("" when the
// store lacks it, with the parsed reference).
func find(ref string, opts Options) (string, Ref, error) {
	if local, err := CheckPath(ref); local || err != nil {
		return ref, Ref{}, err
	}
	r, err := ParseRef(ref)
	if err != nil {
		return "", Ref{}, err
	}
	store, err := StoreDir(opts)
	if err != nil {
		return "", r, err
	}
	p, err := findLocal(store, r)
	return p, r, err
}

// looksLikePath reports whether a reference that names no file was meant as
// a path rather than a model name.
func looksLikePath(ref string) bool {
	lower := strings.ToLower(ref)
	if strings.HasPrefix(lower, "hf.co/") || strings.HasPrefix(lower, "huggingface.co/") || strings.Contains(lower, "://") {
		return false
	}
	return strings.HasSuffix(lower, ".gguf") || filepath.IsAbs(ref) || strings.HasPrefix(ref, ".") ||
		strings.HasPrefix(ref, "~") || strings.ContainsRune(ref, filepath.Separator) && strings.Count(ref, "/") != 1
}
