// Package hubtest runs a local server that answers like the Hugging Face Hub,
// for tests of model pulls that never touch the internet.
//
// The Hub lists files at /api/models/OWNER/REPO/tree/main (paged with a Link
// header), and answers /OWNER/REPO/resolve/main/FILE with a 302 to a CDN on
// another host, reporting the file's SHA-256 in X-Linked-Etag and ETag and its
// size in X-Linked-Size. The CDN serves the bytes with Range support (206 and
// Content-Range). Both log every request.
package hubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is a file in a fake repository.
type File struct {
	Path string
	Data []byte
	// Corrupt serves Data with one byte changed while the Hub still reports
	// the checksum of Data.
	Corrupt bool
	// ReportSize overrides the size the Hub reports (listing and
	// X-Linked-Size) when non-zero, as for a file too big for the disk.
	ReportSize int64

	sum string // SHA256(Data), computed once
}

// Request is one request either server received.
type Request struct {
	Method, Path, Range, Authorization string
	CDN                                bool // served by the CDN host
}

// Server is a fake Hub with its CDN.
type Server struct {
	URL string // the Hub's base URL: set HF_ENDPOINT to it
	// Token, when set, is the bearer token the Hub requires.
	Token string
	// PageSize, when set, splits tree listings into pages of this many
	// entries.
	PageSize int

	hub, cdn *httptest.Server
	mu       sync.Mutex
	repos    map[string][]File // "owner/repo" (lower case) → files
	cuts     map[string][]int64
	log      []Request
}

// New starts a fake Hub holding repos ("OWNER/REPO" → files); it stops when
// the test ends.
func New(t testing.TB, repos map[string][]File) *Server {
	s := &Server{repos: map[string][]File{}, cuts: map[string][]int64{}}
	for k, v := range repos {
		files := append([]File(nil), v...)
		for i := range files {
			files[i].sum = SHA256(files[i].Data)
		}
		s.repos[strings.ToLower(k)] = files
	}
	s.hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.cdn = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.URL = s.hub.URL
	t.Cleanup(func() {
		s.hub.CloseClientConnections()
		s.cdn.CloseClientConnections()
		s.hub.Close()
		s.cdn.Close()
	})
	return s
}

// Cut makes the next GETs of a file from the CDN close the connection after
// sending these many bytes of the body, one cut per GET.
func (s *Server) Cut(path string, after ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cuts[path] = append(s.cuts[path], after...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Downloads returns the CDN GETs of a file so far.
func (s *Server) Downloads(path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.CDN && r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/"+path) {
			out = append(out, r)
		}
	}
	return out
}

// SHA256 is the hex SHA-256 of data, as the Hub reports it.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (s *Server) record(r *http.Request, cdn bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"),
		Authorization: r.Header.Get("Authorization"), CDN: cdn})
}

func (s *Server) find(owner, repo string) ([]File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.repos[strings.ToLower(owner+"/"+repo)]
	return f, ok
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func size(f File) int64 {
	if f.ReportSize != 0 {
		return f.ReportSize
	}
	return int64(len(f.Data))
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.record(r, false)
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		// Like the Hub: an unknown or private repository looks the same.
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "tree" && parts[5] == "main":
		files, ok := s.find(parts[2], parts[3])
		if !ok {
			hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
			return
		}
		s.serveTree(w, r, files)
	case len(parts) >= 5 && parts[2] == "resolve" && parts[3] == "main":
		files, ok := s.find(parts[0], parts[1])
		if !ok {
			hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
			return
		}
		path := strings.Join(parts[4:], "/")
		for _, f := range files {
			if f.Path == path {
				sum := f.sum
				w.Header().Set("Location", s.cdn.URL+"/blobs/"+sum+"/"+path+"?signature=x")
				w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
				w.Header().Set("ETag", `"`+sum+`"`)
				w.Header().Set("X-Linked-Size", strconv.FormatInt(size(f), 10))
				w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
				w.WriteHeader(http.StatusFound)
				return
			}
		}
		hubError(w, http.StatusNotFound, "EntryNotFound", path+" does not exist on \"main\"")
	default:
		http.NotFound(w, r)
	}
}

type lfs struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int    `json:"pointerSize"`
}

type entry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *lfs   `json:"lfs,omitempty"`
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, files []File) {
	var entries []entry
	dirs := map[string]bool{}
	for _, f := range files {
		if i := strings.LastIndexByte(f.Path, '/'); i > 0 && !dirs[f.Path[:i]] {
			dirs[f.Path[:i]] = true
			entries = append(entries, entry{Type: "directory", OID: strings.Repeat("d", 40), Path: f.Path[:i]})
		}
		entries = append(entries, entry{Type: "file", OID: strings.Repeat("b", 40), Size: size(f), Path: f.Path,
			LFS: &lfs{OID: f.sum, Size: size(f), PointerSize: 134}})
	}
	entries = append(entries, entry{Type: "file", OID: strings.Repeat("c", 40), Size: 1519, Path: ".gitattributes"})
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	end := len(entries)
	if s.PageSize > 0 && start+s.PageSize < end {
		end = start + s.PageSize
		next := *r.URL
		q := next.Query()
		q.Set("cursor", strconv.Itoa(end))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.hub.URL, next.RequestURI()))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(entries[min(start, end):end])
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.record(r, true)
	// /blobs/SHA/PATH
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/blobs/"), "/", 2)
	if len(parts) != 2 || r.URL.Query().Get("signature") == "" {
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return
	}
	var file *File
	s.mu.Lock()
	for _, files := range s.repos {
		for i := range files {
			if files[i].Path == parts[1] && files[i].sum == parts[0] {
				file = &files[i]
			}
		}
	}
	var cut int64 = -1
	if r.Method == http.MethodGet && len(s.cuts[parts[1]]) > 0 {
		cut = s.cuts[parts[1]][0]
		s.cuts[parts[1]] = s.cuts[parts[1]][1:]
	}
	s.mu.Unlock()
	if file == nil {
		http.NotFound(w, r)
		return
	}
	data := file.Data
	if file.Corrupt {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0x40
	}
	w.Header().Set("ETag", `"`+parts[0]+`"`)
	if cut < 0 {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		return
	}
	// Announce the whole (remaining) body, send part of it, then drop the
	// connection, as a network failure would.
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" {
		fmt.Sscanf(rg, "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)-int(start)))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
	}
	w.Write(data[start:min(start+cut, int64(len(data)))])
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}
