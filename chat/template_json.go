package chat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), byte for byte. Unlike jinja2's own tojson it does not escape <, >, & and '.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	opts := jsonOpts{itemSep: ", ", keySep: ": "}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(params.Args) > len(names) {
		return exec.AsValue(fmt.Errorf("tojson takes at most %d arguments", len(names)))
	}
	arg := map[string]*exec.Value{}
	for i, a := range params.Args {
		arg[names[i]] = a
	}
	for k, v := range params.KwArgs {
		if !slices.Contains(names, k) {
			return exec.AsValue(fmt.Errorf("tojson got an unexpected keyword argument %q", k))
		}
		arg[k] = v
	}
	if v := arg["ensure_ascii"]; v != nil {
		opts.ascii = v.IsTrue()
	}
	if v := arg["sort_keys"]; v != nil {
		opts.sortKeys = v.IsTrue()
	}
	if v := arg["indent"]; v != nil && !v.IsNil() {
		switch {
		case v.IsInteger():
			opts.indent = strings.Repeat(" ", max(0, v.Integer()))
		case v.IsString():
			opts.indent = v.String()
		default:
			return exec.AsValue(fmt.Errorf("tojson: indent must be an integer or a string, not %s", v.String()))
		}
		opts.indented = true
		opts.itemSep = ","
	}
	if v := arg["separators"]; v != nil && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 || !v.Index(0).IsString() || !v.Index(1).IsString() {
			return exec.AsValue(fmt.Errorf("tojson: separators must be two strings, not %s", v.String()))
		}
		opts.itemSep, opts.keySep = v.Index(0).String(), v.Index(1).String()
	}
	var b strings.Builder
	if err := opts.encode(&b, in, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(b.String())
}

type jsonOpts struct {
	ascii, sortKeys, indented bool
	indent                    string
	itemSep, keySep           string
}

const maxJSONDepth = 512

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.indented {
		b.WriteByte('\n')
		for range depth {
			b.WriteString(o.indent)
		}
	}
}

func (o *jsonOpts) encode(b *strings.Builder, v *exec.Value, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("tojson: nesting too deep")
	}
	switch {
	case v.IsNil():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.Bool()))
	case v.IsInteger():
		b.WriteString(v.String())
	case v.IsFloat():
		b.WriteString(pyFloat(v.Float()))
	case v.IsString():
		o.quote(b, v.String())
	case v.IsList():
		n := v.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			if err := o.encode(b, v.Index(i), depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	case v.IsDict():
		items := dictItems(v)
		if len(items) == 0 {
			b.WriteString("{}")
			return nil
		}
		type kv struct {
			key string
			val *exec.Value
		}
		pairs := make([]kv, len(items))
		for i, it := range items {
			p := it.([]any)
			k, err := jsonKey(p[0].(*exec.Value))
			if err != nil {
				return err
			}
			pairs[i] = kv{k, p[1].(*exec.Value)}
		}
		if o.sortKeys {
			sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].key < pairs[j].key })
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			o.quote(b, p.key)
			b.WriteString(o.keySep)
			if err := o.encode(b, p.val, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: %s is not JSON serializable", v.String())
	}
	return nil
}

// jsonKey is how json.dumps writes a dict key: strings as they are, numbers, booleans and None as JSON text.
func jsonKey(k *exec.Value) (string, error) {
	switch {
	case k.IsString():
		return k.String(), nil
	case k.IsBool():
		return strconv.FormatBool(k.Bool()), nil
	case k.IsInteger():
		return k.String(), nil
	case k.IsFloat():
		return pyFloat(k.Float()), nil
	case k.IsNil():
		return "null", nil
	}
	return "", fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %s", k.String())
}

// quote writes s as json.dumps does: \" \\ \n \r \t \b \f, other controls as \u00XX, and with ensure_ascii
// everything past ASCII as \uXXXX (surrogate pairs beyond the BMP).
func (o *jsonOpts) quote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case r < utf8.RuneSelf || !o.ascii:
				b.WriteRune(r)
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat is a float as json.dumps writes it: Python's repr (the shortest digits that round-trip, positional
// when the decimal exponent is in (-4, 16], else d.ddde±XX), with NaN, Infinity and -Infinity.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sign := ""
	if math.Signbit(f) {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	if f == 0 {
		return sign + "0.0"
	}
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// strftimeNow is transformers' strftime_now(format) for a fixed instant.
func strftimeNow(now time.Time) func(*exec.Evaluator, *exec.VarArgs) *exec.Value {
	return func(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
		if len(params.Args) != 1 || !params.Args[0].IsString() {
			return exec.AsValue(errors.New("strftime_now takes one format string"))
		}
		return exec.AsValue(strftime(now, params.Args[0].String()))
	}
}

// strftime formats t as C's strftime (glibc, as Python on Linux calls it) for the directives templates use,
// including glibc's %-d style flag that drops padding. Unknown directives are copied.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if !noPad {
				s = strings.Repeat("0", max(0, width-len(s))) + s
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if noPad {
				num(t.Day(), 0)
			} else {
				fmt.Fprintf(&b, "%2d", t.Day())
			}
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num((t.Hour()+11)%12+1, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if noPad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
