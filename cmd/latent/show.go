package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/internal/units"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/model/deepseek2"
)

func newShowCmd() *cobra.Command {
	var asJSON, tensors bool
	cmd := &cobra.Command{
		Use:   "show MODEL",
		Short: "Describe a GGUF model: shape, size, weight types, bytes read per token, tokenizer",
		Long: `Describe a GGUF model: shape, size, weight types, bytes read per token, tokenizer.

MODEL is a .gguf file or a model in the store (latent list); show never
downloads one (latent pull does).`,
		Args: oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := openStored(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			info := model.Describe(f, tensors)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return printInfo(out, info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().BoolVar(&tensors, "tensors", false, "list every tensor with its type and shape")
	return cmd
}

func printInfo(w io.Writer, in *model.Info) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("file", "%s (%s, GGUF v%d)", in.File, units.Bytes(in.FileBytes), in.GGUFVersion)
	if in.Name != "" {
		row("name", "%s", in.Name)
	}
	row("architecture", "%s", orNone(in.Architecture))
	if a := in.Deepseek2; a != nil {
		layers := fmt.Sprintf("%d", a.Layers)
		if a.MoELayers > 0 {
			layers += fmt.Sprintf(" (%d dense, %d MoE)", a.DenseLayers, a.MoELayers)
		}
		if a.MTPLayers > 0 {
			layers += fmt.Sprintf(" + %d multi-token-prediction", a.MTPLayers)
		}
		row("layers", "%s", layers)
		row("embedding", "%d, vocabulary %d", a.Dim, a.Vocab)
		q := "none (attn_q)"
		if a.QLoRA > 0 {
			q = fmt.Sprint(a.QLoRA)
		}
		kvb := "absorbed attn_k_b/attn_v_b"
		if a.Legacy {
			kvb = "legacy combined attn_kv_b"
		}
		row("attention", "MLA, %d heads; q_lora %s, kv_lora %d; qk %d nope + %d rope, v %d; %s", a.Heads, q, a.KVLoRA, a.Nope, a.Rope, a.VHead, kvb)
		row("kv cache", "%d values per position per layer, %s per token at f16", a.KVLoRA+a.Rope, units.Bytes(a.CacheBytes))
		var ffn []string
		if a.DenseLayers > 0 {
			ffn = append(ffn, fmt.Sprintf("dense %d", a.FF))
		}
		if a.MoELayers > 0 {
			moe := fmt.Sprintf("MoE %d experts × %d, %d used", a.Experts, a.ExpertFF, a.ExpertsUsed)
			if a.SharedExperts > 0 {
				moe += fmt.Sprintf(" + %d shared", a.SharedExperts)
			}
			moe += ", " + a.Gating + " routing"
			if a.ExpertNorm {
				moe += ", normalised"
			}
			if a.ExpertScale != 1 {
				moe += ", scale " + g32(a.ExpertScale)
			}
			ffn = append(ffn, moe)
		}
		row("feed-forward", "%s", strings.Join(ffn, "; "))
		ctx := fmt.Sprintf("%d (RoPE base %s", a.Context, g32(a.RopeBase))
		if a.RopeScaling != "" {
			ctx += ", " + a.RopeScaling
		}
		row("context", "%s)", ctx)
	}
	if in.Architecture != deepseek2.Arch {
		row("note", "latent runs %s models; this file can be inspected but not run", deepseek2.Arch)
	}
	if in.ArchError != "" {
		row("problem", "%s", in.ArchError)
	}
	params := humanCount(in.Params)
	if in.ActiveParams > 0 && in.ActiveParams != in.Params {
		params += fmt.Sprintf(" (%s active per token)", humanCount(in.ActiveParams))
	}
	row("parameters", "%s, %.2f bits per weight", params, in.BitsPerParam)
	if in.DecodeBytes > 0 {
		row("decode reads", "%s of weights per token", units.Bytes(in.DecodeBytes))
	}
	var types []string
	for _, t := range in.Types {
		types = append(types, fmt.Sprintf("%s %d (%s)", t.Type, t.Tensors, units.Bytes(t.Bytes)))
	}
	row("tensors", "%d: %s", in.TensorCount, strings.Join(types, ", "))
	if t := in.Tokenizer; t != nil {
		desc := t.Model
		if t.Model == "gpt2" {
			desc = "byte-level BPE (gpt2)"
		}
		if t.Pre != "" {
			desc += ", pre-tokenizer " + t.Pre
		}
		row("tokenizer", "%s; %d tokens, %d merges, %d control", desc, t.Tokens, t.Merges, t.Control)
		var sp []string
		for _, s := range t.Special {
			sp = append(sp, fmt.Sprintf("%s %d %q", s.Role, s.ID, s.Text))
		}
		if t.AddBOS != nil {
			sp = append(sp, fmt.Sprintf("add_bos %v", *t.AddBOS))
		}
		if len(sp) > 0 {
			row("special", "%s", strings.Join(sp, ", "))
		}
	} else {
		row("tokenizer", "none")
	}
	if in.ChatTemplate {
		row("chat template", "yes (%d bytes)", in.Tokenizer.Template)
	} else {
		row("chat template", "no")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(in.Tensors) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TENSOR\tTYPE\tSHAPE\tSIZE")
		for _, t := range in.Tensors {
			dims := make([]string, len(t.Shape))
			for i, d := range t.Shape {
				dims[i] = fmt.Sprint(d)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Type, strings.Join(dims, "×"), units.Bytes(t.Bytes))
		}
		return tw.Flush()
	}
	return nil
}

// g32 prints a value stored as float32 in the file without float64 noise (1.8, not 1.7999999523162842).
func g32(x float64) string { return strconv.FormatFloat(x, 'g', -1, 32) }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f K", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
