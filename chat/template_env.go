package chat

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// maxRange bounds range(): a chat template never needs more, and a hostile one cannot spin forever on it.
const maxRange = 1 << 20

// maxMacroDepth bounds macro recursion: deeper, Go's stack overflow would kill the process, not fail the render.
const maxMacroDepth = 200

// maxOutput bounds what one render writes (a variable so that tests can lower it).
var maxOutput = 64 << 20

// depthVar is the per-render variable holding the macro call depth.
const depthVar = "__latent_macro_depth"

// templateName is the one name the loader knows, so {% include %} and friends find nothing else.
const templateName = "/chat_template.jinja"

// compiled is a gonja template with our environment.
type compiled struct {
	tpl *exec.Template
}

var (
	envOnce sync.Once
	env     *exec.Environment
	cfg     *config.Config
)

// environment is gonja's built-in environment with transformers' settings and our Python-faithful
// replacements. It is built once and only read afterwards.
func environment() (*exec.Environment, *config.Config) {
	envOnce.Do(func() {
		cfg = config.New()
		cfg.TrimBlocks = true
		cfg.LeftStripBlocks = true

		filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
		filters.Replace("tojson", filterToJSON)
		filters.Replace("items", filterItems)

		structures := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
		if macro, ok := structures.Get("macro"); ok {
			structures.Replace("macro", guardedMacroParser(macro))
		}
		if loop, ok := structures.Get("for"); ok {
			structures.Replace("for", nonRecursiveFor(loop))
		}
		// A chat template is one self-contained text; including itself would recurse without end.
		for _, name := range []string{"include", "import", "from", "extends"} {
			if structures.Exists(name) {
				structures.Replace(name, unsupported(name))
			}
		}

		globals := exec.NewContext(map[string]any{
			"raise_exception": raiseException,
			"range":           rangeList,
		})
		env = &exec.Environment{
			Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables).Update(globals),
			Filters:           filters,
			Tests:             builtins.Tests,
			ControlStructures: structures,
			Methods: exec.Methods{
				Bool:  builtins.Methods.Bool,
				Int:   builtins.Methods.Int,
				Float: builtins.Methods.Float,
				List:  builtins.Methods.List,
				Str:   strMethods(),
				Dict:  dictMethods(),
			},
		}
	})
	return env, cfg
}

func compile(src string) (c *compiled, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("chat template: parser failed: %v", r)
		}
	}()
	tpl, err := parse(src)
	if err != nil {
		var syn *parser.SyntaxError
		if errors.As(err, &syn) && syn.Line == 0 {
			_, conf := environment()
			syn.Line = lexErrorLine(src, conf) // gonja's lexer errors carry an offset, not a line
		}
		err = templateError(err)
		if msg, ok := strings.CutPrefix(err.Error(), "chat template: "); ok {
			if line := failingLine(src, err.Error()); line > 0 {
				err = fmt.Errorf("chat template line %d: %s", line, msg)
			}
		}
		return nil, err
	}
	return &compiled{tpl: tpl}, nil
}

func parse(src string) (*exec.Template, error) {
	e, conf := environment()
	loader, err := loaders.NewMemoryLoader(map[string]string{templateName: src})
	if err != nil {
		return nil, err
	}
	return exec.NewTemplate(templateName, conf, loader, e)
}

// failingLine finds the line of a parse error that gonja reports without one
// (the arguments of a tag it rejects, as in "{% for %}"): the first line that
// ends a prefix of src failing with the same error. Once the bad tag is in a
// prefix every longer prefix fails the same way, so a binary search finds it.
// It returns 0 when no prefix does.
func failingLine(src, msg string) int {
	lines := strings.SplitAfter(src, "\n")
	failsAlike := func(n int) (same bool) {
		defer func() {
			if recover() != nil {
				same = false
			}
		}()
		_, err := parse(strings.Join(lines[:n], ""))
		return err != nil && templateError(err).Error() == msg
	}
	n := sort.Search(len(lines), func(i int) bool { return failsAlike(i + 1) }) + 1
	if n > len(lines) {
		return 0
	}
	return n
}

func (c *compiled) render(vars map[string]any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: render failed: %v", r)
		}
	}()
	vars[depthVar] = new(macroDepth)
	w := &limitedBuilder{limit: maxOutput}
	if err := c.tpl.Execute(w, exec.NewContext(vars)); err != nil {
		return "", templateError(err)
	}
	if w.err != nil { // gonja does not always pass write errors on
		return "", fmt.Errorf("chat template: %w", w.err)
	}
	return w.String(), nil
}

// limitedBuilder is a strings.Builder that refuses to grow past limit.
type limitedBuilder struct {
	b     strings.Builder // not embedded: its WriteString would bypass the limit
	limit int
	err   error
}

func (b *limitedBuilder) String() string { return b.b.String() }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.err == nil && b.b.Len()+len(p) > b.limit {
		b.err = fmt.Errorf("output longer than %d bytes", b.limit)
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.b.Write(p)
}

type macroDepth struct{ n int }

func unsupported(name string) parser.ControlStructureParser {
	return func(p, args *parser.Parser) (nodes.ControlStructure, error) {
		return nil, p.Error(fmt.Sprintf("{%% %s %%} is not supported in chat templates", name), p.Current())
	}
}

// guardedMacroParser parses {% macro %} as gonja does and bounds the defined macro's recursion.
func guardedMacroParser(base parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := base(p, args)
		if m, ok := cs.(*controlStructures.MacroControlStructure); ok && err == nil {
			return &guardedMacro{m}, nil
		}
		return cs, err
	}
}

// nonRecursiveFor parses {% for %} as gonja does but refuses `recursive` loops, whose loop(...) calls could
// recurse past Go's stack; chat templates do not use them.
func nonRecursiveFor(base parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p, args *parser.Parser) (nodes.ControlStructure, error) {
		start := p.Current()
		cs, err := base(p, args)
		if f, ok := cs.(*controlStructures.ForControlStructure); ok && err == nil && f.Recursive {
			return nil, p.Error("recursive for loops are not supported in chat templates", start)
		}
		return cs, err
	}
}

type guardedMacro struct {
	*controlStructures.MacroControlStructure
}

func (g *guardedMacro) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	fn, err := exec.MacroNodeToFunc(g.Macro, r)
	if err != nil {
		return fmt.Errorf("macro %s: %w", g.Name, err)
	}
	v, _ := r.Environment.Context.Get(depthVar)
	depth, _ := v.(*macroDepth)
	if depth == nil {
		return fmt.Errorf("macro %s: no depth counter", g.Name)
	}
	r.Environment.Context.Set(g.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if depth.n >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %s: recursion deeper than %d", g.Name, maxMacroDepth))
		}
		depth.n++
		defer func() { depth.n-- }()
		return fn(params)
	}))
	return nil
}

// lexErrorLine is the line of the lexer's error in src, or 0.
func lexErrorLine(src string, conf *config.Config) int {
	s := tokens.LexAll(src, conf)
	for !s.End() {
		s.Next()
	}
	if !s.IsError() {
		return 0
	}
	norm := strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n") // as the lexer sees it
	pos := min(max(s.Current().Pos, 0), len(norm))
	return strings.Count(norm[:pos], "\n") + 1
}

var atLine = regexp.MustCompile(`at line (\d+)`)

// templateError turns gonja's error chain into one line that names the template line: "chat template line
// N: what went wrong".
func templateError(err error) error {
	var syn *parser.SyntaxError
	if errors.As(err, &syn) {
		msg := syn.Message
		if syn.Raw != "" {
			msg += fmt.Sprintf(" near %q", syn.Raw)
		}
		if syn.Column == 0 && syn.Raw != "" { // a lexer error: Raw is its message
			msg = syn.Raw
		}
		if syn.Line == 0 { // a token at the end of the text has no position; compile finds the line
			return fmt.Errorf("chat template: %s", oneLine(msg))
		}
		return fmt.Errorf("chat template line %d: %s", syn.Line, oneLine(msg))
	}
	msg := err.Error()
	// gonja wraps "failed to parse template '<whole source>': cause"; keep the cause only.
	if u := errors.Unwrap(err); u != nil && strings.HasPrefix(msg, "failed to parse template") {
		msg = u.Error()
	}
	// Render errors nest "Unable to ... at line N: ..." once per enclosing block; the last is the innermost.
	line := ""
	if m := atLine.FindAllStringSubmatchIndex(msg, -1); len(m) > 0 {
		last := m[len(m)-1]
		line = " line " + msg[last[2]:last[3]]
		if rest, ok := strings.CutPrefix(msg[last[1]:], ": "); ok {
			msg = rest
		}
	}
	return fmt.Errorf("chat template%s: %s", line, oneLine(rootCause(msg)))
}

var raised = regexp.MustCompile(`raise_exception: (.*)$`)

// rootCause keeps the innermost message of a ": "-joined chain when it is ours (raise_exception), else all.
func rootCause(msg string) string {
	if m := raised.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return msg
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// raiseException is transformers' raise_exception(message): the render fails with the message.
func raiseException(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	msg := ""
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return exec.AsValue(fmt.Errorf("raise_exception: %s", msg))
}

// rangeList is Python's range() as a list, bounded by maxRange (gonja's own streams through a goroutine that
// leaks when a loop breaks early).
func rangeList(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	var n [3]int
	if len(params.Args) < 1 || len(params.Args) > 3 {
		return exec.AsValue(fmt.Errorf("range expected 1 to 3 arguments, got %d", len(params.Args)))
	}
	for i, a := range params.Args {
		if !a.IsInteger() {
			return exec.AsValue(fmt.Errorf("range: %s is not an integer", a.String()))
		}
		n[i] = a.Integer()
	}
	start, stop, step := 0, n[0], 1
	if len(params.Args) >= 2 {
		start, stop = n[0], n[1]
	}
	if len(params.Args) == 3 {
		step = n[2]
	}
	if step == 0 {
		return exec.AsValue(errors.New("range() arg 3 must not be zero"))
	}
	var out []any
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) == maxRange {
			return exec.AsValue(fmt.Errorf("range longer than %d", maxRange))
		}
		out = append(out, i)
	}
	if out == nil {
		out = []any{}
	}
	return exec.AsValue(out)
}

// filterItems is dict.items() as a filter, in the dict's order.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if !in.IsDict() {
		return exec.AsValue(errors.New("items requires a mapping"))
	}
	return exec.AsValue(dictItems(in))
}

// dictItems lists a dict's [key, value] pairs (as *exec.Value) in order: insertion order for our dicts, sorted
// for Go maps.
func dictItems(d *exec.Value) []any {
	items := []any{}
	d.Iterate(func(_, _ int, key, value *exec.Value) bool {
		items = append(items, []any{key, value})
		return true
	}, func() {})
	return items
}

// dictMethods replaces gonja's items, keys, values and get, which go through an unordered Go map copy and lose
// both the order and nested dicts' identity, and keeps its other dict methods.
func dictMethods() *exec.MethodSet[map[string]any] {
	base := builtins.Methods.Dict
	m := map[string]exec.Method[map[string]any]{
		"items": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
			if err := noArgs("items", args); err != nil {
				return nil, err
			}
			return dictItems(self), nil
		},
		"keys": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
			return dictColumn("keys", self, args, 0)
		},
		"values": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
			return dictColumn("values", self, args, 1)
		},
		"get": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) < 1 || len(args.Args) > 2 || len(args.KwArgs) > 0 {
				return nil, exec.ErrInvalidCall(errors.New("get() takes 1 or 2 positional arguments"))
			}
			// Return plain values: a *exec.Value inside another reads as an error.
			if v, ok := self.GetItem(args.Args[0].Interface()); ok {
				return v.Interface(), nil
			}
			if len(args.Args) == 2 {
				return args.Args[1].Interface(), nil
			}
			return nil, nil
		},
	}
	for _, name := range []string{"pop", "setdefault", "update", "copy", "clear"} {
		if f, ok := base.Get(name); ok {
			m[name] = f
		}
	}
	return exec.NewMethodSet(m)
}

// dictColumn is keys() (col 0) or values() (col 1) as plain values, in the dict's order.
func dictColumn(name string, self *exec.Value, args *exec.VarArgs, col int) (any, error) {
	if err := noArgs(name, args); err != nil {
		return nil, err
	}
	out := []any{}
	for _, kv := range dictItems(self) {
		out = append(out, kv.([]any)[col].(*exec.Value).Interface())
	}
	return out, nil
}

func noArgs(name string, args *exec.VarArgs) error {
	if len(args.Args) > 0 || len(args.KwArgs) > 0 {
		return exec.ErrInvalidCall(fmt.Errorf("%s() takes no arguments", name))
	}
	return nil
}

// strMethods is gonja's string methods with split, rsplit, strip, lstrip, rstrip and replace made to follow
// Python.
func strMethods() *exec.MethodSet[string] {
	base := builtins.Methods.Str
	m := map[string]exec.Method[string]{
		"split":   func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) { return pySplit(s, args, false) },
		"rsplit":  func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) { return pySplit(s, args, true) },
		"strip":   func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) { return pyStrip(s, args, true, true) },
		"lstrip":  func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) { return pyStrip(s, args, true, false) },
		"rstrip":  func(s string, _ *exec.Value, args *exec.VarArgs) (any, error) { return pyStrip(s, args, false, true) },
		"replace": pyReplace,
	}
	for _, name := range []string{"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
		"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
		"partition", "removeprefix", "removesuffix", "rfind", "rjust", "rpartition", "splitlines",
		"startswith", "swapcase", "title", "upper", "zfill"} {
		if f, ok := base.Get(name); ok {
			m[name] = f
		}
	}
	return exec.NewMethodSet(m)
}

// pyIsSpace is Python's str.isspace for one character: Unicode White_Space plus the ASCII separators 0x1c-0x1f.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// strArg is the optional string-or-None argument at position i or keyword name; ok is false for None.
func strArg(args *exec.VarArgs, i int, name string) (s string, ok bool, err error) {
	var v *exec.Value
	if i < len(args.Args) {
		v = args.Args[i]
	} else if kv, has := args.KwArgs[name]; has {
		v = kv
	}
	if v == nil || v.IsNil() {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, exec.ErrInvalidCall(fmt.Errorf("%s must be None or a string, not %s", name, v.String()))
	}
	return v.String(), true, nil
}

func pySplit(s string, args *exec.VarArgs, fromRight bool) (any, error) {
	sep, hasSep, err := strArg(args, 0, "sep")
	if err != nil {
		return nil, err
	}
	maxsplit := -1
	if v, ok := args.KwArgs["maxsplit"]; ok {
		maxsplit = v.Integer()
	} else if len(args.Args) > 1 {
		if !args.Args[1].IsInteger() {
			return nil, exec.ErrInvalidCall(fmt.Errorf("maxsplit must be an integer, not %s", args.Args[1].String()))
		}
		maxsplit = args.Args[1].Integer()
	}
	var parts []string
	switch {
	case hasSep && sep == "":
		return nil, exec.ErrInvalidCall(errors.New("empty separator"))
	case hasSep && maxsplit < 0:
		parts = strings.Split(s, sep)
	case hasSep && !fromRight:
		parts = strings.SplitN(s, sep, maxsplit+1)
	case hasSep:
		for len(parts) < maxsplit {
			i := strings.LastIndex(s, sep)
			if i < 0 {
				break
			}
			parts = append(parts, s[i+len(sep):])
			s = s[:i]
		}
		parts = append(parts, s)
		slices.Reverse(parts)
	default:
		parts = splitSpace(s, maxsplit, fromRight)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// splitSpace is str.split() without a separator: runs of whitespace separate, ends are trimmed, and after
// maxsplit splits the rest is one part (trimmed on the splitting side only).
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	r := []rune(s)
	if fromRight {
		slices.Reverse(r)
	}
	var parts []string
	i := 0
	for {
		for i < len(r) && pyIsSpace(r[i]) {
			i++
		}
		if i == len(r) {
			break
		}
		if maxsplit >= 0 && len(parts) == maxsplit {
			parts = append(parts, string(r[i:]))
			break
		}
		j := i
		for j < len(r) && !pyIsSpace(r[j]) {
			j++
		}
		parts = append(parts, string(r[i:j]))
		i = j
	}
	if fromRight {
		for k, p := range parts {
			pr := []rune(p)
			slices.Reverse(pr)
			parts[k] = string(pr)
		}
		slices.Reverse(parts)
	}
	if parts == nil {
		parts = []string{}
	}
	return parts
}

func pyStrip(s string, args *exec.VarArgs, left, right bool) (any, error) {
	chars, has, err := strArg(args, 0, "chars")
	if err != nil {
		return nil, err
	}
	cut := pyIsSpace
	if has {
		cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

// pyReplace is str.replace(old, new[, count]); gonja's insists on count.
func pyReplace(s string, _ *exec.Value, args *exec.VarArgs) (any, error) {
	if len(args.Args) < 2 || len(args.Args) > 3 || len(args.KwArgs) > 0 {
		return nil, exec.ErrInvalidCall(errors.New("replace() takes 2 or 3 positional arguments"))
	}
	if !args.Args[0].IsString() || !args.Args[1].IsString() {
		return nil, exec.ErrInvalidCall(errors.New("replace() arguments must be strings"))
	}
	count := -1
	if len(args.Args) == 3 {
		if !args.Args[2].IsInteger() {
			return nil, exec.ErrInvalidCall(errors.New("replace() count must be an integer"))
		}
		count = args.Args[2].Integer()
	}
	return strings.Replace(s, args.Args[0].String(), args.Args[1].String(), count), nil
}
