package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/model"
)

func newLogitsCmd() *cobra.Command {
	var (
		tokens, feed string
		steps        int
		opts         model.Options
	)
	cmd := &cobra.Command{
		Use:   "logits MODEL --tokens 1016,706,44 [--steps 16] [--feed t1,t2,...]",
		Short: "Print the logits of a prompt and of greedy decode steps as JSON (the golden-logits format)",
		Args:  oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt, err := parseTokens("--tokens", tokens, true)
			if err != nil {
				return err
			}
			fed, err := parseTokens("--feed", feed, false)
			if err != nil {
				return err
			}
			if steps < 0 {
				return fmt.Errorf("--steps %d: must not be negative", steps)
			}
			if len(fed) > steps {
				return fmt.Errorf("--feed has %d tokens for %d --steps", len(fed), steps)
			}
			lm, _, err := loadRef(cmd, args[0], opts)
			if err != nil {
				return err
			}
			defer lm.Close()
			if need := len(prompt) + steps; need > lm.Model.Context() {
				return fmt.Errorf("%d prompt tokens + %d steps exceed the context of %d (raise --ctx)", len(prompt), steps, lm.Model.Context())
			}
			tr, err := engine.RunTrace(lm.Model, prompt, steps, fed)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(cmd.OutOrStdout(), 1<<20)
			if err := json.NewEncoder(w).Encode(tr); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&tokens, "tokens", "", "prompt token ids, comma-separated (nothing is added: include BOS yourself)")
	cmd.Flags().IntVar(&steps, "steps", 16, "decode steps after the prompt")
	cmd.Flags().StringVar(&feed, "feed", "", "token ids to consume at the first steps instead of the argmax")
	addLoadFlags(cmd, &opts)
	return cmd
}

// addLoadFlags adds the flags every command that runs a model shares.
func addLoadFlags(cmd *cobra.Command, o *model.Options) {
	addBackendFlags(cmd, o)
	cmd.Flags().IntVar(&o.Context, "ctx", 0, "context length to allocate (0: the smaller of the trained context and 4096)")
}

// addBackendFlags adds --backend and --threads (addLoadFlags without --ctx,
// for a command that sizes the context itself).
func addBackendFlags(cmd *cobra.Command, o *model.Options) {
	cmd.Flags().StringVar(&o.Backend, "backend", "auto", "backend to run on: auto (CUDA when a GPU is present), cpu or cuda")
	cmd.Flags().IntVar(&o.Threads, "threads", 0, "CPU threads (0: one per core)")
}

// parseTokens reads a comma-separated list of token ids; an empty list is
// an error when required.
func parseTokens(flag, s string, required bool) ([]int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		if required {
			return nil, fmt.Errorf("%s: give at least one token id", flag)
		}
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: %q is not a token id", flag, p)
		}
		out[i] = int32(v)
	}
	return out, nil
}
