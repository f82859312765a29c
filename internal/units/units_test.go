package units

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{999, "999 B"},
		{1000, "1.0 kB"},
		{9_949, "9.9 kB"},
		{9_950, "10 kB"},
		{999_499, "999 kB"},
		{999_500, "1.0 MB"},
		{3_917_568, "3.9 MB"},
		{1_104_000_000, "1.1 GB"},
		{18_470_000_000, "18 GB"},
		{math.MaxInt64, "9.2 EB"},
	} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
