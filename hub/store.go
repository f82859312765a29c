package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The store keeps each file where the Hub keeps it:
//
//	DIR/hf.co/OWNER/REPO/PATH/IN/REPO.gguf          a complete, verified model
//	DIR/hf.co/OWNER/REPO/PATH/IN/REPO.gguf.sha256   its checksum, as sha256sum writes it
//	DIR/hf.co/OWNER/REPO/PATH/IN/REPO.gguf.SHA12.partial   a download in progress
//
// A model file appears only by an atomic rename after its checksum and GGUF
// header have been checked, so a name ending in .gguf is always complete.
const hubDir = "hf.co"

// StoreDir is the model store opts names: opts.Dir, else $LATENT_MODELS, else
// latent/models under the user cache directory.
func StoreDir(opts Options) (string, error) {
	if opts.Dir != "" {
		return opts.Dir, nil
	}
	if d := os.Getenv("LATENT_MODELS"); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("model store: %w (set LATENT_MODELS)", err)
	}
	return filepath.Join(c, "latent", "models"), nil
}

// repoDir is where a repository's files live in the store.
func repoDir(store string, ref Ref) string {
	return filepath.Join(store, hubDir, ref.Owner, ref.Repo)
}

// localFile is where a repository file lives in the store.
func localFile(store string, ref Ref, file string) string {
	return filepath.Join(repoDir(store, ref), filepath.FromSlash(file))
}

// partialName is the download-in-progress name for a file with this SHA-256:
// naming the content keeps a partial of an older revision from being resumed
// into a newer one.
func partialName(final, sha string) string {
	return final + "." + sha[:12] + ".partial"
}

// Local is a model in the store.
type Local struct {
	Name     string    `json:"name"`     // the reference that names it: hf.co/OWNER/REPO:QUANT
	Path     string    `json:"path"`     // absolute file path
	Size     int64     `json:"size"`     // bytes
	Modified time.Time `json:"modified"` // when it was downloaded
	SHA256   string    `json:"sha256"`   // from the .sha256 file beside it; "" if absent
}

// localFiles lists the complete .gguf files of one repository in the store,
// with paths relative to the repository.
func localFiles(store string, ref Ref) ([]RemoteFile, error) {
	root := repoDir(store, ref)
	var files []RemoteFile
	err := walkRepo(root, func(p string, d fs.DirEntry) error {
		if !strings.HasSuffix(strings.ToLower(d.Name()), ".gguf") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, RemoteFile{Path: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	return files, err
}

// walkRepo calls fn for each regular file under a repository's directory
// in the store; a repository with no directory has none.
func walkRepo(root string, fn func(p string, d fs.DirEntry) error) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return fn(p, d)
	})
	if err != nil {
		return fmt.Errorf("model store: %w", err)
	}
	return nil
}

// findLocal returns the stored file ref names, or "" when it is not stored.
// It uses the same rules as choosing from the Hub's listing, so a reference
// without a tag finds the preferred quantization among those pulled.
func findLocal(store string, ref Ref) (string, error) {
	files, err := localFiles(store, ref)
	if err != nil || len(files) == 0 {
		return "", err
	}
	m, _, err := choose(ref, files)
	if err != nil {
		return "", nil // not stored in a form this reference picks
	}
	return localFile(store, ref, m.Files[0].Path), nil
}

// List returns the models in the store, sorted by name.
func List(opts Options) ([]Local, error) {
	store, err := StoreDir(opts)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(store, hubDir)
	owners, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model store: %w", err)
	}
	var out []Local
	for _, o := range owners {
		if !o.IsDir() {
			continue
		}
		repos, err := os.ReadDir(filepath.Join(root, o.Name()))
		if err != nil {
			return nil, fmt.Errorf("model store: %w", err)
		}
		for _, r := range repos {
			if !r.IsDir() {
				continue
			}
			ref := Ref{Owner: o.Name(), Repo: r.Name()}
			files, err := localFiles(store, ref)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				l, err := describeLocal(store, ref, f, files)
				if err != nil {
					return nil, err
				}
				out = append(out, l)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// describeLocal names a stored file by the shortest reference that finds it:
// hf.co/OWNER/REPO:QUANT when its tag picks it among the repository's stored
// files, else hf.co/OWNER/REPO/FILE.
func describeLocal(store string, ref Ref, f RemoteFile, all []RemoteFile) (Local, error) {
	p := localFile(store, ref, f.Path)
	st, err := os.Stat(p)
	if err != nil {
		return Local{}, fmt.Errorf("model store: %w", err)
	}
	name := Ref{Owner: ref.Owner, Repo: ref.Repo, File: f.Path}
	if tag := quantTag(f.Path); tag != "" && !splitRe.MatchString(f.Path) {
		byTag := Ref{Owner: ref.Owner, Repo: ref.Repo, Quant: tag}
		if m, _, err := choose(byTag, all); err == nil && m.Files[0].Path == f.Path {
			name = byTag
		}
	}
	l := Local{Name: name.String(), Path: p, Size: st.Size(), Modified: st.ModTime()}
	if sum := storedSum(p); isSHA256(sum) {
		l.SHA256 = sum
	}
	return l, nil
}

// Remove deletes the stored model ref names, with its checksum file and any
// partial downloads of it, and returns the paths it removed. A reference
// that matches several stored quantizations without naming one is refused.
// Files outside the store are never touched.
func Remove(ref string, opts Options) ([]string, error) {
	store, err := StoreDir(opts)
	if err != nil {
		return nil, err
	}
	if looksLikePath(ref) {
		return nil, fmt.Errorf("%s: rm removes models from the store (%s) by name, never files by path", ref, store)
	}
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	files, err := localFiles(store, r)
	if err != nil {
		return nil, err
	}
	var target string
	if len(files) > 0 {
		if r.File == "" && r.Quant == "" && len(groupModels(files)) > 1 {
			var names []string
			for _, f := range files {
				l, err := describeLocal(store, r, f, files)
				if err != nil {
					return nil, err
				}
				names = append(names, l.Name)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("%s: %d models of this repository are stored; name one: %s", r, len(files), strings.Join(names, ", "))
		}
		if m, _, err := choose(r, files); err == nil {
			target = localFile(store, r, m.Files[0].Path)
		}
	}
	var removed []string
	if target != "" {
		for _, p := range []string{target, target + ".sha256"} {
			if err := os.Remove(p); err == nil {
				removed = append(removed, p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("rm %s: %w", r, err)
			}
		}
	}
	// Partial downloads this reference would resume.
	partials, err := findPartials(store, r, target)
	if err != nil {
		return removed, err
	}
	for _, p := range partials {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("rm %s: %w", r, err)
		}
		removed = append(removed, p)
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("%s: not in the model store %s (see latent list)", r, store)
	}
	pruneEmpty(filepath.Dir(removed[0]), filepath.Join(store, hubDir))
	return removed, nil
}

// findPartials lists the partial downloads in ref's repository that belong
// to the file target or, without a target, to files ref would choose.
func findPartials(store string, ref Ref, target string) ([]string, error) {
	root := repoDir(store, ref)
	var out []string
	err := walkRepo(root, func(p string, d fs.DirEntry) error {
		if !strings.HasSuffix(d.Name(), ".partial") {
			return nil
		}
		final := strings.TrimSuffix(p, ".partial")
		final = final[:max(strings.LastIndexByte(final, '.'), 0)]
		if target != "" {
			if final == target {
				out = append(out, p)
			}
			return nil
		}
		rel, err := filepath.Rel(root, final)
		if err != nil {
			return err
		}
		if m, _, err := choose(ref, []RemoteFile{{Path: filepath.ToSlash(rel)}}); err == nil && m != nil {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// pruneEmpty removes empty directories from dir up to, not including, stop.
func pruneEmpty(dir, stop string) {
	for strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// isSHA256 reports whether s is 64 lowercase hex digits.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
