package hub

import (
	"fmt"
	"testing"
)

// Any string either fails to parse with an error or gives a reference with
// a valid owner and repository whose canonical form parses back to it.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"hf.co/o/r", "hf.co/o/r:Q8_0", "o/r:latest", "glm-4.7-flash:Q4_K_M", "https://huggingface.co/o/r/blob/main/m.gguf",
		"hf.co/o/r/sub/m-Q4_0.gguf", "hf.co/o/r/blob/main/blob/main/m.gguf", "hf.co/../r", "hf.co/o/r:", " o/r ", "youtu-llm-2b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		if !namePart.MatchString(r.Owner) || !namePart.MatchString(r.Repo) {
			t.Fatalf("ParseRef(%q) = %+v: invalid owner or repository", s, r)
		}
		back, err := ParseRef(r.String())
		if err != nil {
			t.Fatalf("ParseRef(%q) = %+v, whose form %q does not parse: %v", s, r, r.String(), err)
		}
		back.Alias, r.Alias = "", ""
		if back != r {
			t.Fatalf("ParseRef(%q) = %+v, but its form %q parses to %+v", s, r, r.String(), back)
		}
	})
}

// Any header either is refused or gives a start and total that read back
// from their canonical form.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 5-9/*", "bytes 5/10", "bytes -1-2/3", "bits 0-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, total, ok := parseContentRange(s)
		if !ok {
			return
		}
		tot := "*"
		if total != -1 {
			tot = fmt.Sprint(total)
		}
		s2 := fmt.Sprintf("bytes %d-%d/%s", start, start, tot)
		if start2, total2, ok := parseContentRange(s2); !ok || start2 != start || total2 != total {
			t.Fatalf("%q gave %d, %d; %q gives %d, %d, %v", s, start, total, s2, start2, total2, ok)
		}
	})
}
