package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model"
)

func newRunCmd() *cobra.Command {
	var (
		prompt    string
		stops     []string
		n         int
		sampling  = engine.DefaultSamplerOptions()
		ignoreEOS bool
		verbose   bool
		opts      model.Options
	)
	cmd := &cobra.Command{
		Use:   "run MODEL --prompt-tokens 1016,706,44 [-n 64] [--temperature 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --seed N] [--stop 5,6]",
		Short: "Generate tokens after a prompt of token ids, printing their ids as they come",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := engine.Request{MaxTokens: n, Sampler: sampling}
			var err error
			if req.Prompt, err = parseTokens("--prompt-tokens", prompt, true); err != nil {
				return err
			}
			for _, s := range stops {
				seq, err := parseTokens("--stop", s, true)
				if err != nil {
					return err
				}
				req.Stop = append(req.Stop, seq)
			}
			if n == 0 || n < -1 {
				return fmt.Errorf("-n %d: give a positive count, or -1 for no limit", n)
			}
			if !cmd.Flags().Changed("seed") {
				// llama.cpp's default too: a fresh seed, shown by --verbose.
				req.Sampler.Seed = rand.Uint64()
			}
			if err := req.Sampler.Validate(); err != nil {
				return fmt.Errorf("--%w", err) // the messages start with the flag's name
			}

			start := time.Now()
			lm, err := model.Load(args[0], opts)
			if err != nil {
				return err
			}
			defer lm.Close()
			loaded := time.Since(start)
			if !ignoreEOS {
				req.EOG = eogTokens(lm.File)
			}

			// Ctrl-C ends the generation, not the process: what was
			// generated stays printed and the line is finished.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			out, sep := cmd.OutOrStdout(), ""
			res, err := engine.Generate(ctx, lm.Model, req, func(t engine.Token) error {
				_, err := fmt.Fprintf(out, "%s%d", sep, t.ID)
				sep = " "
				return err
			})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(out); err != nil {
				return err
			}

			errOut := cmd.ErrOrStderr()
			if res.StopReason == engine.StopContext {
				fmt.Fprintf(errOut, "stopped: the context of %d tokens is full (raise --ctx)\n", lm.Model.Context())
			}
			if verbose {
				printRunStats(errOut, res, loaded, req.Sampler.Seed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&prompt, "prompt-tokens", "", "prompt token ids, comma-separated (nothing is added: include BOS yourself)")
	f.IntVarP(&n, "n-predict", "n", 64, "tokens to generate at most (-1: until the end of generation or a full context)")
	f.Float32Var(&sampling.Temperature, "temperature", sampling.Temperature, "sampling temperature (0: greedy)")
	f.IntVar(&sampling.TopK, "top-k", sampling.TopK, "sample from the k most likely tokens (0: off)")
	f.Float32Var(&sampling.TopP, "top-p", sampling.TopP, "sample from the most likely tokens holding this probability (0 or 1: off)")
	f.Float32Var(&sampling.MinP, "min-p", sampling.MinP, "drop tokens less likely than this times the most likely one (0: off)")
	f.Float32Var(&sampling.RepeatPenalty, "repeat-penalty", sampling.RepeatPenalty, "penalise the logits of recent tokens by this factor (1: off)")
	f.IntVar(&sampling.RepeatLastN, "repeat-last-n", sampling.RepeatLastN, "recent tokens the penalty looks at (0: off, -1: all)")
	f.Uint64Var(&sampling.Seed, "seed", 0, "sampling seed (default: a random one)")
	f.StringArrayVar(&stops, "stop", nil, "stop when the output ends with these token ids, comma-separated (repeatable; not printed)")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "do not stop at the model's end-of-generation tokens")
	f.BoolVarP(&verbose, "verbose", "v", false, "print load time, seed and speeds to stderr")
	addLoadFlags(cmd, &opts)
	return cmd
}

// eogTokens are the ids that end a generation, as the model file names them
// (eos, and eot and eom where the vocabulary has them).
func eogTokens(f *gguf.File) []int32 {
	var ids []int32
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		v, ok := f.Get(key)
		if !ok {
			continue
		}
		// Some conversions write -1 for "none": Uint rejects it.
		if id, ok := v.Uint(); ok && id <= math.MaxInt32 && !slices.Contains(ids, int32(id)) {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

func printRunStats(w io.Writer, r *engine.Result, load time.Duration, seed uint64) {
	fmt.Fprintf(w, "load      %.3f s\n", load.Seconds())
	fmt.Fprintf(w, "seed      %d\n", seed)
	fmt.Fprintf(w, "prompt    %d tokens, %.1f tokens/s, first token after %.3f s\n", r.PromptTokens, r.PromptRate(), r.PrefillDuration.Seconds())
	fmt.Fprintf(w, "generate  %d tokens, %.1f tokens/s after the first, stop: %s\n", r.Generated, r.DecodeRate(), r.StopReason)
}
