package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultEndpoint is the Hub, as huggingface_hub's HF_ENDPOINT defaults.
const defaultEndpoint = "https://huggingface.co"

// client talks to one Hub endpoint.
type client struct {
	endpoint *url.URL
	token    string
	http     *http.Client // follows redirects (downloads)
	meta     *http.Client // stops at a redirect off the Hub (metadata)
	store    string
	progress io.Writer

	retries    int           // attempts after a failure that made no progress
	retryDelay time.Duration // the first wait; it doubles
	stall      time.Duration // no byte for this long fails the attempt
}

func newClient(opts Options) (*client, error) {
	store, err := StoreDir(opts)
	if err != nil {
		return nil, err
	}
	ep := opts.Endpoint
	if ep == "" {
		ep = os.Getenv("HF_ENDPOINT")
	}
	if ep == "" {
		ep = defaultEndpoint
	}
	u, err := url.Parse(strings.TrimRight(ep, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Hub endpoint %q (HF_ENDPOINT) is not an http(s) URL", ep)
	}
	tok := opts.Token
	if tok == "" {
		tok = os.Getenv("HF_TOKEN")
	}
	c := &client{endpoint: u, token: strings.TrimSpace(tok), store: store, progress: opts.Progress,
		retries: 5, retryDelay: time.Second, stall: 60 * time.Second}
	if opts.retryDelay > 0 {
		c.retryDelay = opts.retryDelay
	}
	if opts.stall > 0 {
		c.stall = opts.stall
	}
	if opts.retries != 0 {
		c.retries = max(opts.retries, 0)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 60 * time.Second
	// Compressed transfers would make Range offsets meaningless.
	tr.DisableCompression = true
	c.http = &http.Client{Transport: tr}
	c.meta = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != c.endpoint.Host {
			return http.ErrUseLastResponse // the CDN: its URL is what we want
		}
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		return nil
	}}
	return c, nil
}

// request builds a request, with the token only for the Hub itself: a
// presigned CDN URL needs none, and a token must not leak to other hosts.
func (c *client) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "latent")
	if c.token != "" && req.URL.Host == c.endpoint.Host {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// hubURL is the endpoint joined with escaped path parts.
func (c *client) hubURL(parts ...string) string {
	u := *c.endpoint
	for _, p := range parts {
		for _, s := range strings.Split(p, "/") {
			u.Path += "/" + url.PathEscape(s)
		}
	}
	u.RawPath = ""
	return u.String()
}

// treeEntry is one entry of /api/models/OWNER/REPO/tree/main.
type treeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// listFiles lists every file of a repository's main branch, following the
// listing's pages (a Link header with rel="next").
func (c *client) listFiles(ctx context.Context, ref Ref) ([]RemoteFile, error) {
	next := c.hubURL("api/models", ref.Owner, ref.Repo, "tree/main") + "?recursive=true"
	var files []RemoteFile
	for page := 0; next != ""; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("%s: the Hub's file listing does not end", ref)
		}
		req, err := c.request(ctx, http.MethodGet, next)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: list files: %w", ref, netErr(err, c.endpoint))
		}
		if resp.StatusCode != http.StatusOK {
			err := c.statusErr(resp, ref, "")
			resp.Body.Close()
			return nil, err
		}
		var entries []treeEntry
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&entries)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: the Hub's file listing is not the JSON expected: %w", ref, err)
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			f := RemoteFile{Path: e.Path, Size: e.Size}
			if e.LFS != nil {
				f.Size = e.LFS.Size
				if sum := strings.ToLower(e.LFS.OID); isSHA256(sum) {
					f.SHA256 = sum
				}
			}
			files = append(files, f)
		}
		next = nextLink(resp.Header.Get("Link"), resp.Request.URL)
	}
	return files, nil
}

// nextLink finds the rel="next" URL in a Link header, resolved against base.
func nextLink(h string, base *url.URL) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		if u, err := base.Parse(target); err == nil {
			return u.String()
		}
	}
	return ""
}

// fileMeta is what the Hub says about a file it serves.
type fileMeta struct {
	SHA256 string // from X-Linked-Etag (or ETag); "" if not a SHA-256
	Size   int64  // X-Linked-Size (or Content-Length); -1 if unknown
	URL    string // where to GET it: the CDN URL the Hub redirects to
}

// head asks the Hub for a file's checksum, size and download URL without
// following the redirect to the CDN, as huggingface_hub does.
func (c *client) head(ctx context.Context, ref Ref, file string) (fileMeta, error) {
	u := c.hubURL(ref.Owner, ref.Repo, "resolve/main", file)
	req, err := c.request(ctx, http.MethodHead, u)
	if err != nil {
		return fileMeta{}, err
	}
	resp, err := c.meta.Do(req)
	if err != nil {
		return fileMeta{}, fmt.Errorf("%s: %s: %w", ref, file, netErr(err, c.endpoint))
	}
	resp.Body.Close()
	m := fileMeta{Size: -1, URL: resp.Request.URL.String()}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		loc, err := resp.Location()
		if err != nil {
			return fileMeta{}, fmt.Errorf("%s: %s: the Hub redirected without a Location", ref, file)
		}
		m.URL = loc.String()
	case resp.StatusCode != http.StatusOK:
		return fileMeta{}, c.statusErr(resp, ref, file)
	}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.ToLower(strings.Trim(strings.TrimPrefix(etag, "W/"), `"`))
	if isSHA256(etag) {
		m.SHA256 = etag
	}
	size := resp.Header.Get("X-Linked-Size")
	if size == "" && resp.StatusCode == http.StatusOK {
		size = resp.Header.Get("Content-Length")
	}
	if n, err := strconv.ParseInt(size, 10, 64); err == nil && n >= 0 {
		m.Size = n
	}
	return m, nil
}

// statusErr turns a failed Hub answer into a one-line error that says what
// to do. file is "" for the repository listing.
func (c *client) statusErr(resp *http.Response, ref Ref, file string) error {
	code := resp.Header.Get("X-Error-Code")
	msg := resp.Header.Get("X-Error-Message")
	if msg == "" && resp.Request.Method != http.MethodHead {
		var body struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body) == nil {
			msg = body.Error
		}
	}
	host := c.endpoint.Host
	what := ref.String()
	if file != "" {
		what += ": " + file
	}
	detail := ""
	if msg != "" {
		detail = " (" + msg + ")"
	}
	switch {
	case code == "RepoNotFound" || file == "" && resp.StatusCode == http.StatusNotFound:
		hint := ""
		if c.token == "" {
			hint = "; if it is private or gated, set HF_TOKEN"
		}
		return fmt.Errorf("%s: no such model repository on %s%s", ref, host, hint)
	case code == "RevisionNotFound":
		return fmt.Errorf("%s: the repository has no main branch on %s", ref, host)
	case code == "EntryNotFound" || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: file not found on %s%s", what, host, detail)
	case code == "GatedRepo" || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: access is gated: accept the conditions at %s/%s and set HF_TOKEN to a token of that account%s",
			ref, c.endpoint, ref.Repository(), detail)
	case resp.StatusCode == http.StatusUnauthorized:
		if c.token != "" {
			return fmt.Errorf("%s: the Hub refused HF_TOKEN (HTTP 401)%s", what, detail)
		}
		return fmt.Errorf("%s: the Hub wants a login (HTTP 401): set HF_TOKEN%s", what, detail)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%s: the Hub is rate-limiting requests (HTTP 429); wait a minute, or set HF_TOKEN%s", what, detail)
	}
	return fmt.Errorf("%s: %s answered %s%s", what, host, resp.Status, detail)
}

// netErr makes a transport error short: "cannot reach huggingface.co: ..."
func netErr(err error, ep *url.URL) error {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &dns):
		return fmt.Errorf("cannot reach %s: %w", ep.Host, dns)
	case errors.As(err, &op):
		return fmt.Errorf("cannot reach %s: %w", ep.Host, op)
	}
	return err
}
