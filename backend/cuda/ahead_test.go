package cuda

import (
	"fmt"
	"testing"

	"github.com/latent-ai/latent/quant"
)

// Prepare works from the types a weight will be kept in on the device
// (storedType), before any weight is uploaded: for every device type and
// shape, that is the type hostWeight, what an upload keeps, gives it.
func TestStoredTypeIsWhatTheDeviceKeeps(t *testing.T) {
	for typ := range deviceTypes {
		for _, dims := range [][]uint64{{256}, {256, 3}, {512, 2, 3}} {
			t.Run(fmt.Sprintf("%s%v", typ, dims), func(t *testing.T) {
				rb, err := typ.RowBytes(int64(dims[0]))
				if err != nil {
					t.Fatal(err)
				}
				rows := int64(1)
				for _, d := range dims[1:] {
					rows *= int64(d)
				}
				w, _, err := (&Backend{}).hostWeight("w", typ, dims, [][]byte{make([]byte, rows*rb)})
				if err != nil {
					t.Fatal(err)
				}
				if got := storedType(typ, dims); got != w.typ {
					t.Errorf("storedType says %s, the device keeps %s", got, w.typ)
				}
			})
		}
	}
}

// A load takes a unit from Prepare's compiles only where the source is the
// one it would compile: the same unit with the same model defines.
func TestAheadOnlyForTheSameSource(t *testing.T) {
	defs, _ := shapedAs(2048, quant.Q4_0).shapeDefines()
	other, _ := shapedAs(4096, quant.Q4_0).shapeDefines()
	us := units([]string{"T_Q4_0"}, true)
	src, err := unitSource(defs, us[0])
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{ahead: map[string]*aheadUnit{us[0].name: {src: src}}}
	if b.aheadOf(defs, us[0]) == nil {
		t.Errorf("unit %s with the defines it was started with: not taken", us[0].name)
	}
	if b.aheadOf(other, us[0]) != nil {
		t.Errorf("unit %s with other defines (MAX_K): taken", us[0].name)
	}
	if b.aheadOf(defs, us[1]) != nil {
		t.Errorf("unit %s, not started: taken", us[1].name)
	}
	if (&Backend{}).aheadOf(defs, us[0]) != nil {
		t.Error("no Prepare: a unit taken")
	}
}
