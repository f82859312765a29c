package main

import (
	"slices"
	"strings"
	"testing"
)

// Any --depth either is refused or gives depths in [0, maxBenchTokens] that
// read back from their list.
func FuzzParseDepths(f *testing.F) {
	for _, s := range []string{"0", "0,4096", " 1 , 2 ", "x", "-1", "", "1,,2", "99999999999999999999", "1073741825"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := parseDepths(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--depth: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error %q is not one line naming --depth", s, err)
			}
			return
		}
		for _, d := range ds {
			if d < 0 || d > maxBenchTokens {
				t.Fatalf("%q: depth %d out of range", s, d)
			}
		}
		if back, err := parseDepths(joinInts(ds)); err != nil || !slices.Equal(back, ds) {
			t.Fatalf("%q gave %v; %q gives %v, %v", s, ds, joinInts(ds), back, err)
		}
	})
}

// Any token list, as --prompt-tokens or --detokenize, either is refused or
// gives ids in range that read back from their list.
func FuzzParseTokenLists(f *testing.F) {
	for _, s := range []string{"1,2,3", " 7 ", "", "1,x", "-1", "2147483648", "[1,2]", "[1,", "[-1]", "[5000]", "1,,2"} {
		f.Add(s)
	}
	const vocab = 1024
	f.Fuzz(func(t *testing.T, s string) {
		if ids, err := parseTokens("--prompt-tokens", s, true); err == nil {
			for _, id := range ids {
				if id < 0 {
					t.Fatalf("%q: token id %d", s, id)
				}
			}
			if back, err := parseTokens("--prompt-tokens", joinInts(ids), true); err != nil || !slices.Equal(back, ids) {
				t.Fatalf("%q gave %v; %q gives %v, %v", s, ids, joinInts(ids), back, err)
			}
		} else if !strings.HasPrefix(err.Error(), "--prompt-tokens: ") {
			t.Fatalf("%q: error %q does not name the flag", s, err)
		}
		if ids, err := parseIDList(s, vocab); err == nil {
			for _, id := range ids {
				if id < 0 || id >= vocab {
					t.Fatalf("%q: token id %d outside the vocabulary", s, id)
				}
			}
		} else if !strings.HasPrefix(err.Error(), "--detokenize: ") {
			t.Fatalf("%q: error %q does not name the flag", s, err)
		}
	})
}
