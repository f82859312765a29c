// Package constrain limits what a model may write next, so that its answer
// has a given form: JSON mode (Ollama's format "json", OpenAI's
// response_format json_object), as llama.cpp's JSON grammar does.
package constrain

// JSON recognises a JSON object byte by byte: Feed refuses the first byte
// that cannot continue one, and Done reports that the object is whole. It
// starts with its '{' and ends with its '}', nothing around them. Strings
// are UTF-8 (a character may span tokens: the bytes it still needs carry
// over). Whitespace between tokens is what llama.cpp's JSON grammar allows,
// one space or a newline and at most MaxIndent spaces or tabs, so that a
// model cannot pad forever; containers nest at most MaxDepth deep.
type JSON struct {
	mode   mode
	key    bool  // the string being read is an object's key
	cont   uint8 // a character's continuation bytes still to come
	lo     byte  // the range the next of them must lie in
	hi     byte
	hex    uint8 // \u digits still to come
	lit    uint8 // the literal being matched (literals) and how far (pos)
	pos    uint8
	space  uint8   // the whitespace so far: 0 none, spaceOne after a space, 1+n after a newline and n indents
	frames []frame // the open containers, innermost last

	// With a schema (NewSchemaJSON): the value about to start, or being
	// read (nil: any); a key's or an enum string's candidates (a bit each)
	// and how many of its bytes have come.
	cur  *Schema
	cand uint64
	cpos int
}

// frame is an open container: '{' or '[', its schema (nil: any), the
// properties seen, the items begun.
type frame struct {
	open  byte
	s     *Schema
	seen  uint64
	count int
}

// NewSchemaJSON recognises one object that s (from ParseSchema) allows.
func NewSchemaJSON(s *Schema) JSON { return JSON{cur: s} }

// CopyTo makes dst a copy of j that does not share its state.
func (j *JSON) CopyTo(dst *JSON) {
	frames := dst.frames[:0]
	*dst = *j
	dst.frames = append(frames, j.frames...)
}

// strict reports whether the innermost container is an object with listed
// properties (only those may appear), and returns its frame.
func (j *JSON) strict() (*frame, bool) {
	f := j.top()
	return f, f != nil && f.s != nil && f.s.props != nil
}

// mask is a bit for each of n candidates.
func mask(n int) uint64 { return uint64(1)<<n - 1 }

// The limits JSON keeps.
const (
	MaxIndent = 20
	MaxDepth  = 64
	spaceOne  = 255
)

type mode uint8

const (
	mStart      mode = iota // before the object
	mValue                  // a value must start
	mValueOrEnd             // after '[': a value or ']'
	mKeyOrEnd               // after '{': a key or '}'
	mKey                    // after ',' in an object: a key
	mColon                  // after a key
	mAfter                  // after a value: ',' or the container's end
	mString                 // inside a string
	mEscape                 // after '\' in a string
	mUnicode                // in \uXXXX
	mMinus                  // after '-': a digit
	mZero                   // a leading 0
	mInt                    // integer digits
	mDot                    // after '.': a digit
	mFrac                   // fraction digits
	mExp                    // after 'e': a sign or a digit
	mExpSign                // after the exponent's sign: a digit
	mExpDigits              // exponent digits
	mLiteral                // inside true, false or null
	mDone                   // the object is whole
)

var literals = [...]string{"true", "false", "null"}

// Done reports whether the object is whole.
func (j *JSON) Done() bool { return j.mode == mDone }

// FeedString feeds s's bytes, reporting whether all were accepted. After a
// refused byte j is not usable (JSONTokens tries bytes on a copy).
func (j *JSON) FeedString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !j.Feed(s[i]) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

// Feed takes the next byte, reporting whether it can continue the object.
func (j *JSON) Feed(c byte) bool {
	switch j.mode {
	case mValue, mValueOrEnd, mKeyOrEnd, mKey, mColon, mAfter: // not before the object, as llama.cpp's grammar
		if isSpace(c) {
			switch {
			case j.space == 0 && c == ' ':
				j.space = spaceOne
			case j.space == 0 && c == '\n':
				j.space = 1
			case j.space >= 1 && j.space <= MaxIndent && (c == ' ' || c == '\t'):
				j.space++
			default:
				return false
			}
			return true
		}
		j.space = 0
	}
	switch j.mode {
	case mStart:
		return c == '{' && j.push(c)
	case mValue:
		return j.value(c)
	case mValueOrEnd:
		if c == ']' {
			return j.pop()
		}
		return j.value(c)
	case mKeyOrEnd:
		if c == '}' {
			return j.pop()
		}
		fallthrough
	case mKey:
		if c != '"' {
			return false
		}
		j.mode, j.key = mString, true
		if f, ok := j.strict(); ok {
			if j.cand = mask(len(f.s.props)) &^ f.seen; j.cand == 0 {
				return false // every property is there
			}
			j.cpos = 0
		} else {
			j.cur = nil // a key of an object whose properties are any
		}
	case mColon:
		if c != ':' {
			return false
		}
		j.mode = mValue
	case mAfter:
		f := j.top()
		top := f.open
		if c == ',' && f.s != nil {
			if top == '{' && f.s.props != nil && mask(len(f.s.props))&^f.seen == 0 {
				return false // no property left
			}
			if top == '[' && f.s.maxItems >= 0 && f.count >= f.s.maxItems {
				return false
			}
		}
		switch {
		case c == ',' && top == '{':
			j.mode = mKey
		case c == ',':
			j.mode = mValue
		case c == '}' && top == '{', c == ']' && top == '[':
			return j.pop()
		default:
			return false
		}
	case mString:
		if j.key {
			if f, ok := j.strict(); ok {
				return j.matchKey(c, f)
			}
		}
		if !j.key && j.cur != nil && j.cur.enum != nil { // cur is the string's own schema while it is read
			return j.matchEnum(c)
		}
		switch {
		case j.cont > 0:
			if c < j.lo || c > j.hi {
				return false
			}
			j.cont, j.lo, j.hi = j.cont-1, 0x80, 0xBF
		case c >= 0x80:
			return j.lead(c)
		case c == '"':
			if j.key {
				j.mode, j.key = mColon, false
			} else {
				j.mode = mAfter
			}
		case c == '\\':
			j.mode = mEscape
		case c < 0x20:
			return false
		}
	case mEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j.mode = mString
		case 'u':
			j.mode, j.hex = mUnicode, 4
		default:
			return false
		}
	case mUnicode:
		if !isHex(c) {
			return false
		}
		if j.hex--; j.hex == 0 {
			j.mode = mString
		}
	case mMinus:
		switch {
		case c == '0':
			j.mode = mZero
		case isDigit(c):
			j.mode = mInt
		default:
			return false
		}
	case mZero, mInt:
		switch {
		case isDigit(c) && j.mode == mInt:
		case (c == '.' || c == 'e' || c == 'E') && j.cur.integer():
			return false
		case c == '.':
			j.mode = mDot
		case c == 'e' || c == 'E':
			j.mode = mExp
		default:
			return j.endNumber(c)
		}
	case mDot:
		if !isDigit(c) {
			return false
		}
		j.mode = mFrac
	case mFrac:
		switch {
		case isDigit(c):
		case c == 'e' || c == 'E':
			j.mode = mExp
		default:
			return j.endNumber(c)
		}
	case mExp:
		switch {
		case c == '+' || c == '-':
			j.mode = mExpSign
		case isDigit(c):
			j.mode = mExpDigits
		default:
			return false
		}
	case mExpSign:
		if !isDigit(c) {
			return false
		}
		j.mode = mExpDigits
	case mExpDigits:
		if !isDigit(c) {
			return j.endNumber(c)
		}
	case mLiteral:
		lit := literals[j.lit]
		if c != lit[j.pos] {
			return false
		}
		if j.pos++; int(j.pos) == len(lit) {
			j.mode = mAfter
		}
	case mDone:
		return false
	}
	return true
}

// matchKey reads a byte of a key that must be one of f's properties not
// yet seen; at its end the value's schema is the property's.
func (j *JSON) matchKey(c byte, f *frame) bool {
	props := f.s.props
	i, ok := j.narrow(c, len(props), func(i int) string { return props[i].name })
	if ok && i >= 0 {
		f.seen |= 1 << i
		j.cur, j.mode, j.key = props[i].s, mColon, false
	}
	return ok
}

// matchEnum reads a byte of a string that must be one of the enum's.
func (j *JSON) matchEnum(c byte) bool {
	i, ok := j.narrow(c, len(j.cur.enum), func(i int) string { return j.cur.enum[i] })
	if ok && i >= 0 {
		j.mode = mAfter
	}
	return ok
}

// narrow reads byte c of a string that must be one of n candidates (the
// bits of j.cand; name gives each one's text): a closing quote ends it as
// the one whole candidate, whose index comes back; another byte keeps the
// candidates it continues (index -1). ok is false when none fits.
func (j *JSON) narrow(c byte, n int, name func(int) string) (i int, ok bool) {
	if c == '"' {
		for i := range n {
			if j.cand&(1<<i) != 0 && len(name(i)) == j.cpos {
				return i, true
			}
		}
		return -1, false
	}
	var next uint64
	for i := range n {
		if s := name(i); j.cand&(1<<i) != 0 && j.cpos < len(s) && s[j.cpos] == c {
			next |= 1 << i
		}
	}
	j.cand, j.cpos = next, j.cpos+1
	return -1, next != 0
}

// lead starts a character of more than one byte (UTF-8: no overlong forms,
// no surrogates, nothing past U+10FFFF).
func (j *JSON) lead(c byte) bool {
	j.lo, j.hi = 0x80, 0xBF
	switch {
	case c >= 0xC2 && c <= 0xDF:
		j.cont = 1
	case c == 0xE0:
		j.cont, j.lo = 2, 0xA0
	case c == 0xED:
		j.cont, j.hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		j.cont = 2
	case c == 0xF0:
		j.cont, j.lo = 3, 0x90
	case c == 0xF4:
		j.cont, j.hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		j.cont = 3
	default:
		return false
	}
	return true
}

// value starts a value with c.
func (j *JSON) value(c byte) bool {
	if !j.schemaValue(c) {
		return false
	}
	switch {
	case c == '{' || c == '[':
		return j.push(c)
	case c == '"':
		j.mode, j.key = mString, false
	case c == '-':
		j.mode = mMinus
	case c == '0':
		j.mode = mZero
	case isDigit(c):
		j.mode = mInt
	default:
		for i, lit := range literals {
			if c == lit[0] {
				j.mode, j.lit, j.pos = mLiteral, uint8(i), 1
				return true
			}
		}
		return false
	}
	return true
}

// schemaValue checks a value's first byte against its schema: in an array
// the items', in an object the property's (set when its key ended).
func (j *JSON) schemaValue(c byte) bool {
	if f := j.top(); f != nil && f.open == '[' {
		j.cur = nil
		if f.s != nil {
			j.cur = f.s.items
			if f.count++; f.s.maxItems >= 0 && f.count > f.s.maxItems {
				return false
			}
		}
	}
	var t typeSet
	switch {
	case c == '{':
		t = tObject
	case c == '[':
		t = tArray
	case c == '"':
		t = tString
	case c == '-' || isDigit(c):
		t = tNumber
	case c == 't' || c == 'f':
		t = tBool
	case c == 'n':
		t = tNull
	default:
		return false
	}
	if !j.cur.allows(t) {
		return false
	}
	j.cur = j.cur.target()
	if t == tString && j.cur != nil && j.cur.enum != nil {
		j.cand, j.cpos = mask(len(j.cur.enum)), 0
	}
	return true
}

// top is the innermost container's frame (nil before the object).
func (j *JSON) top() *frame {
	if len(j.frames) == 0 {
		return nil
	}
	return &j.frames[len(j.frames)-1]
}

// endNumber ends a number (only a byte that cannot continue it does) and
// reads c after it.
func (j *JSON) endNumber(c byte) bool {
	j.mode = mAfter
	return j.Feed(c)
}

func (j *JSON) push(c byte) bool {
	if len(j.frames) == MaxDepth {
		return false
	}
	j.frames = append(j.frames, frame{open: c, s: j.cur})
	if c == '{' {
		j.mode = mKeyOrEnd
	} else {
		j.mode = mValueOrEnd
	}
	return true
}

func (j *JSON) pop() bool {
	if f := j.top(); f.s != nil {
		if f.open == '{' && f.s.required&^f.seen != 0 {
			return false // a required property is missing
		}
		if f.open == '[' && f.count < f.s.minItems {
			return false
		}
	}
	if j.frames = j.frames[:len(j.frames)-1]; len(j.frames) == 0 {
		j.mode = mDone
	} else {
		j.mode = mAfter
	}
	return true
}
