package hub

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Ref names a GGUF model on the Hugging Face Hub: a repository and either a
// quantization tag (matched against file names), an exact file, or neither
// (the default quantization).
type Ref struct {
	Owner, Repo string
	Quant       string // e.g. Q4_K_M; empty: the default
	File        string // a path inside the repository; empty: chosen by Quant
	Alias       string // the short name the user typed, if any
}

// Repository is "OWNER/REPO".
func (r Ref) Repository() string { return r.Owner + "/" + r.Repo }

// String is the canonical form: hf.co/OWNER/REPO, then :QUANT or /FILE.
func (r Ref) String() string {
	s := "hf.co/" + r.Repository()
	switch {
	case strings.HasPrefix(r.File, "blob/main/") || strings.HasPrefix(r.File, "resolve/main/"):
		s += "/resolve/main/" + r.File // ParseRef drops one blob/main or resolve/main, as the web UI writes them
	case r.File != "":
		s += "/" + r.File
	case r.Quant != "":
		s += ":" + r.Quant
	}
	return s
}

// Alias is a short name for a public GGUF repository.
type Alias struct {
	Name, Repository, Description string
}

// aliases name the three target models. Each points at a public GGUF
// repository whose files are single-file quantizations.
var aliases = []Alias{
	{"youtu-llm-2b", "tencent/Youtu-LLM-2B-GGUF", "Youtu-LLM 2B (Tencent's official GGUF)"},
	{"deepseek-v2-lite", "mradermacher/DeepSeek-V2-Lite-Chat-GGUF", "DeepSeek-V2-Lite-Chat 16B MoE"},
	{"glm-4.7-flash", "bartowski/zai-org_GLM-4.7-Flash-GGUF", "GLM-4.7-Flash 30B-A3B MoE"},
}

// Aliases lists the short model names.
func Aliases() []Alias { return slices.Clone(aliases) }

var (
	namePart  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	quantPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// ParseRef parses a model reference that is not a local path:
//
//	hf.co/OWNER/REPO[:QUANT]   huggingface.co/OWNER/REPO[:QUANT]   https://huggingface.co/OWNER/REPO
//	OWNER/REPO[:QUANT]         hf.co/OWNER/REPO/PATH/FILE.gguf     ALIAS[:QUANT]
//
// A tag of "latest" (as ollama writes it) means the default quantization.
func ParseRef(s string) (Ref, error) {
	orig := s
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("model reference %q: %s (want hf.co/OWNER/REPO[:QUANT], OWNER/REPO:QUANT, a .gguf path or one of %s)", orig, why, aliasNames())
	}
	s = strings.TrimSpace(s)
	for _, p := range []string{"https://", "http://"} {
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			s = s[len(p):]
		}
	}
	hub := false
	for _, p := range []string{"hf.co/", "huggingface.co/", "www.huggingface.co/"} {
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			s, hub = s[len(p):], true
			break
		}
	}
	var quant string
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s, quant = s[:i], s[i+1:]
		if quant == "" {
			return bad("empty quantization tag after ':'")
		}
		if !quantPart.MatchString(quant) {
			return bad(fmt.Sprintf("quantization tag %q has characters other than letters, digits, '.', '_' and '-'", quant))
		}
		if strings.EqualFold(quant, "latest") {
			quant = ""
		}
	}
	if !hub && !strings.Contains(s, "/") {
		for _, a := range aliases {
			if strings.EqualFold(s, a.Name) {
				owner, repo, _ := strings.Cut(a.Repository, "/")
				return Ref{Owner: owner, Repo: repo, Quant: quant, Alias: a.Name}, nil
			}
		}
		return bad("not a known model name")
	}
	parts := strings.Split(s, "/")
	if len(parts) < 2 {
		return bad("no repository")
	}
	r := Ref{Owner: parts[0], Repo: parts[1], Quant: quant}
	for _, p := range parts[:2] {
		if !namePart.MatchString(p) || strings.Contains(p, "..") || strings.HasSuffix(p, ".git") {
			return bad(fmt.Sprintf("%q is not a valid Hugging Face owner or repository name", p))
		}
	}
	if len(parts) > 2 {
		// hf.co/OWNER/REPO/FILE.gguf; the web UI's blob/main and
		// resolve/main segments are dropped.
		rest := parts[2:]
		if len(rest) > 2 && (rest[0] == "blob" || rest[0] == "resolve") && rest[1] == "main" {
			rest = rest[2:]
		}
		file := strings.Join(rest, "/")
		if quant != "" || !strings.HasSuffix(strings.ToLower(file), ".gguf") || !localPath(file) {
			return bad("a path inside a repository must name a .gguf file, without a :QUANT tag")
		}
		r.File = file
	}
	return r, nil
}

// localPath reports whether p is a clean relative slash path that stays
// inside its root (no "..", no absolute or empty parts).
func localPath(p string) bool {
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

func aliasNames() string {
	names := make([]string, len(aliases))
	for i, a := range aliases {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// splitRe matches llama.cpp's split-file suffix: NAME-00001-of-00003.gguf.
var splitRe = regexp.MustCompile(`(?i)-(\d{5})-of-(\d{5})\.gguf$`)

// quantRe is a quantization type as llama.cpp's tools name files.
var quantRe = regexp.MustCompile(`(?i)^(I?Q[1-8](_[0-9A-Z]{1,4})*|TQ[12]_0|BF16|F16|F32|FP16|FP32|MXFP4(_MOE)?)$`)

// stem is a GGUF file's base name without ".gguf" and without a split
// suffix.
func stem(file string) string {
	base := path.Base(file)
	if m := splitRe.FindStringIndex(base); m != nil {
		return base[:m[0]]
	}
	return base[:len(base)-len(path.Ext(base))]
}

// quantTag is the quantization a GGUF file's name declares ("Q4_K_M" for
// "GLM-4.7-Flash-Q4_K_M.gguf", "Q8_0" for "model.q8_0.gguf"), upper-cased,
// or "" when the name declares none. The last such part of the name wins.
func quantTag(file string) string {
	parts := strings.FieldsFunc(stem(file), func(r rune) bool { return r == '-' || r == '.' || r == ' ' })
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		// The longest suffix after an underscore: "Chat_Q4_K_M" holds Q4_K_M.
		for j := -1; j < len(p); j++ {
			if j >= 0 && p[j] != '_' {
				continue
			}
			if quantRe.MatchString(p[j+1:]) {
				return strings.ToUpper(p[j+1:])
			}
		}
	}
	return ""
}

// matchesQuant reports how well a file's name matches the tag the user gave:
// 2 when it is the file's quantization tag, 1 when the tag appears in the
// name as a whole part ("UD-Q4_K_XL", "imatrix"), 0 otherwise. Both are
// case-insensitive; "Q4_K" does not match "Q4_K_M".
func matchesQuant(file, quant string) int {
	if strings.EqualFold(quantTag(file), quant) {
		return 2
	}
	s, q := strings.ToUpper(stem(file)), strings.ToUpper(quant)
	for i := 0; ; {
		j := strings.Index(s[i:], q)
		if j < 0 {
			return 0
		}
		j += i
		end := j + len(q)
		before := j == 0 || strings.ContainsRune("-._ ", rune(s[j-1]))
		after := end == len(s) || strings.ContainsRune("-. ", rune(s[end]))
		if before && after {
			return 1
		}
		i = j + 1
	}
}

// defaultQuants is the order a reference without a tag tries, as ollama and
// llama.cpp do: Q4_K_M first, then the nearest in size and quality, the
// types latent decodes before those it does not, and full precision last.
var defaultQuants = []string{
	"Q4_K_M", "Q4_K_S", "Q4_K", "Q4_0", "Q5_K_M", "Q5_K_S", "Q5_K", "Q5_0", "Q6_K", "Q8_0",
	"IQ4_XS", "IQ4_NL", "Q3_K_M", "Q3_K_L", "Q3_K_S", "Q2_K", "MXFP4_MOE", "MXFP4", "BF16", "F16", "F32",
}

// quantRank orders tags by defaultQuants; unknown tags come after all known.
func quantRank(tag string) int {
	if i := slices.Index(defaultQuants, tag); i >= 0 {
		return i
	}
	return len(defaultQuants)
}

// model is one GGUF model in a repository: a single file, or the parts of a
// split file.
type model struct {
	Files  []RemoteFile // one, or the parts in order
	Stem   string
	Tag    string // quantTag, may be empty
	Size   int64  // all parts
	Parts  int    // declared part count (1 for a single file)
	Unused bool   // mmproj and similar companions, never chosen by default
}

// RemoteFile is a file in a Hub repository as its tree listing reports it.
type RemoteFile struct {
	Path   string
	Size   int64
	SHA256 string // lfs.oid; empty for files not stored in LFS
}

// groupModels gathers a repository's .gguf files into models.
func groupModels(files []RemoteFile) []*model {
	byKey := map[string]*model{}
	var out []*model
	for _, f := range files {
		if !strings.HasSuffix(strings.ToLower(f.Path), ".gguf") {
			continue
		}
		key, parts := f.Path, 1
		if m := splitRe.FindStringSubmatch(path.Base(f.Path)); m != nil {
			key = path.Join(path.Dir(f.Path), stem(f.Path))
			fmt.Sscan(m[2], &parts)
		}
		md := byKey[key]
		if md == nil {
			lower := strings.ToLower(path.Base(f.Path))
			md = &model{Stem: stem(f.Path), Tag: quantTag(f.Path), Parts: parts,
				Unused: strings.Contains(lower, "mmproj") || strings.Contains(lower, "imatrix")}
			byKey[key] = md
			out = append(out, md)
		}
		md.Files = append(md.Files, f)
		md.Size += f.Size
	}
	for _, m := range out {
		sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Files[0].Path < out[j].Files[0].Path })
	return out
}

// label is how a model is offered to the user: its tag, else its file.
func (m *model) label() string {
	name := m.Tag
	if name == "" {
		name = path.Base(m.Files[0].Path)
	}
	if m.Parts > 1 {
		name += fmt.Sprintf(" (split in %d)", m.Parts)
	}
	return name
}

// available lists the models a repository offers, for error messages.
// They come in the default order, so the likeliest choices lead.
func available(models []*model) string {
	models = slices.Clone(models)
	sort.SliceStable(models, func(i, j int) bool { return preferDefault(models[i], models[j]) })
	var names []string
	for _, m := range models {
		if !m.Unused {
			names = append(names, m.label())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// choose picks the model ref asks for among a repository's files, and says
// why in a short phrase ("default Q4_K_M").
func choose(ref Ref, files []RemoteFile) (*model, string, error) {
	models := groupModels(files)
	if len(models) == 0 {
		return nil, "", fmt.Errorf("%s has no GGUF files (latent runs GGUF models; look for a repository ending in -GGUF)", ref)
	}
	var pick *model
	why := ""
	switch {
	case ref.File != "":
		for _, m := range models {
			for _, f := range m.Files {
				if f.Path == ref.File {
					pick = m
				}
			}
		}
		if pick == nil {
			return nil, "", fmt.Errorf("%s: no file %s in the repository (it has: %s)", ref, ref.File, available(models))
		}
	case ref.Quant != "":
		best := 0
		for _, m := range models {
			// Exact tags beat name parts; single files beat split ones;
			// shorter names (no "-imat", "-v2" suffixes) win ties.
			score := matchesQuant(m.Files[0].Path, ref.Quant)
			if score == 0 {
				continue
			}
			if pick == nil || score > best || score == best && better(m, pick) {
				pick, best = m, score
			}
		}
		if pick == nil {
			return nil, "", fmt.Errorf("%s has no GGUF file for quantization %q; available: %s", ref, ref.Quant, available(models))
		}
		why = "quantization " + strings.ToUpper(ref.Quant)
	default:
		for _, m := range models {
			if m.Unused {
				continue
			}
			if pick == nil || preferDefault(m, pick) {
				pick = m
			}
		}
		if pick == nil {
			return nil, "", fmt.Errorf("%s has no GGUF model files (only %s)", ref, models[0].Files[0].Path)
		}
		why = "default " + pick.label()
		if pick.Tag == "Q4_K_M" {
			why = "default Q4_K_M"
		} else {
			why += " (no Q4_K_M here)"
		}
	}
	if pick.Parts > 1 {
		var singles []string
		for _, m := range models {
			if m.Parts == 1 && !m.Unused {
				singles = append(singles, m.label())
			}
		}
		alt := "no single-file quantization here"
		if len(singles) > 0 {
			alt = "single-file: " + strings.Join(singles, ", ")
		}
		return nil, "", fmt.Errorf("%s: %s is split into %d files (%s, ...); latent reads single-file GGUF only: merge them with llama-gguf-split --merge, or choose another quantization (%s)",
			ref, pick.label(), pick.Parts, pick.Files[0].Path, alt)
	}
	return pick, why, nil
}

// better breaks ties between two models matching the same tag.
func better(a, b *model) bool {
	if (a.Parts == 1) != (b.Parts == 1) {
		return a.Parts == 1
	}
	if len(a.Files[0].Path) != len(b.Files[0].Path) {
		return len(a.Files[0].Path) < len(b.Files[0].Path)
	}
	return a.Files[0].Path < b.Files[0].Path
}

// preferDefault orders models for a reference without a tag: single files
// first, then by defaultQuants, then the smaller file.
func preferDefault(a, b *model) bool {
	if (a.Parts == 1) != (b.Parts == 1) {
		return a.Parts == 1
	}
	ra, rb := quantRank(a.Tag), quantRank(b.Tag)
	if ra != rb {
		return ra < rb
	}
	if a.Size != b.Size {
		return a.Size < b.Size
	}
	return better(a, b)
}
