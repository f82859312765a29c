package deepseek2

import (
	"strconv"
	"strings"

	"github.com/latent-ai/latent/gguf"
)

// Footprint is what running the model costs in weights (model.Describe counts
// every weight in the file).
type Footprint struct {
	ActiveParams int64 // weights one decoded token touches
	DecodeBytes  int64 // weight bytes one decoded token reads
}

// FootprintOf counts the parameters and the bytes a decode step reads: every
// decoder tensor once, only the used share of the routed experts, one row of
// the embedding (plus all of it when it doubles as the output matrix), and
// nothing of the multi-token-prediction blocks, which ordinary decoding skips.
func FootprintOf(f *gguf.File, c *Config) Footprint {
	var fp Footprint
	_, hasOutput := f.Tensor("output.weight")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		n := t.Elements()
		if l, ok := layerOf(t.Name); ok && l >= c.DecoderLayers() {
			continue
		}
		switch {
		case t.Name == "token_embd.weight":
			rows := int64(t.Dim(1))
			fp.DecodeBytes += t.Size / rows
			if hasOutput {
				fp.ActiveParams += n / rows
			} else { // tied: the whole matrix is the output projection too
				fp.ActiveParams += n
				fp.DecodeBytes += t.Size
			}
		case strings.HasSuffix(t.Name, "_exps.weight") && c.Experts > 0:
			fp.ActiveParams += n * int64(c.ExpertsUsed) / int64(c.Experts)
			fp.DecodeBytes += t.Size * int64(c.ExpertsUsed) / int64(c.Experts)
		default:
			fp.ActiveParams += n
			fp.DecodeBytes += t.Size
		}
	}
	return fp
}

// layerOf parses the block index from a tensor name like "blk.12.attn_norm.weight".
func layerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	l, err := strconv.Atoi(num)
	return l, err == nil
}
