package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/bench"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/model/deepseek2"
)

func newBenchCmd() *cobra.Command {
	var (
		o      bench.Options
		opts   model.Options
		depths string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "bench MODEL [-p 512] [-n 128] [--depth 0,4096] [--reps 5] [--json]",
		Short: "Measure prefill and decode speed (tokens/s, kernels and weight bytes per token, GB/s) at cache depths",
		Long: `Measure prefill and decode speed at each cache depth, as llama-bench's pp and tg
tests do: the -p prompt is timed as one input after filling the cache to the
depth (the model runs it in passes of at most 512 tokens), then the cache is
cut back to the depth and, after one untimed step (a warm-up, as
llama-bench's), -n tokens are decoded one at a time (greedy) from there, so
decode at --depth 0 starts from an empty cache.`,
		Args: oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Depths, err = parseDepths(depths); err != nil {
				return err
			}
			if o.Prefill < 1 || o.Decode < 1 || o.Reps < 1 {
				return fmt.Errorf("-p %d, -n %d, --reps %d: each must be at least 1", o.Prefill, o.Decode, o.Reps)
			}
			if o.Prefill > maxBenchTokens || o.Decode > maxBenchTokens {
				return fmt.Errorf("-p %d, -n %d: at most %d tokens each", o.Prefill, o.Decode, maxBenchTokens)
			}
			opts.Context = o.Need()
			lm, err := loadWithin(cmd, args[0], opts, fmt.Sprintf("--depth %d + -p %d + -n %d = %d tokens",
				opts.Context-o.Prefill-o.Decode, o.Prefill, o.Decode, opts.Context))
			if err != nil {
				return err
			}
			defer lm.Close()
			o.BytesPerToken = deepseek2.FootprintOf(lm.File, lm.Model.Config).DecodeBytes
			res, err := bench.Run(lm.Model, lm.Backend, filepath.Base(lm.File.Name), o)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return printBench(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Prefill, "prefill", "p", 512, "prompt tokens prefilled in one timed batch")
	f.IntVarP(&o.Decode, "decode", "n", 128, "tokens decoded one at a time")
	f.StringVar(&depths, "depth", "0", "comma-separated cache depths: tokens already in the cache before timing")
	f.IntVar(&o.Reps, "reps", 5, "repetitions per depth (the figures are medians)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array, one object per depth")
	addBackendFlags(cmd, &opts)
	return cmd
}

// loadWithin resolves and loads ref with a cache of opts.Context positions,
// which the flags described by asked call for; past the model's trained
// context, the error names those flags instead of the context.
func loadWithin(cmd *cobra.Command, ref string, opts model.Options, asked string) (*model.Loaded, error) {
	lm, _, err := loadRef(cmd, ref, opts)
	var trained *deepseek2.ErrContextTrained
	if errors.As(err, &trained) {
		return nil, fmt.Errorf("%s: %s, more than the model's trained context of %d", ref, asked, trained.Trained)
	}
	return lm, err
}

// maxBenchTokens bounds -p, -n and each depth, so that their sum cannot
// overflow; no model's context comes near it.
const maxBenchTokens = 1 << 30

// parseDepths reads a comma-separated list of cache depths.
func parseDepths(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--depth: %q is not a token count", p)
		}
		if v > maxBenchTokens {
			return nil, fmt.Errorf("--depth: %d is more than %d tokens", v, maxBenchTokens)
		}
		out = append(out, v)
	}
	return out, nil
}

func printBench(w io.Writer, res []bench.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tmodel\tdepth\tprefill tok/s\tdecode tok/s\tms/token\tkernels/token\tMB/token\tGB/s\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\t%.1f\t\n", r.Backend, r.Model, r.Depth,
			r.PrefillTokS, r.DecodeTokS, r.MsPerToken, r.KernelsPerToken, float64(r.BytesPerToken)/1e6, r.GBs)
	}
	return tw.Flush()
}
