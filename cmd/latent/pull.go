package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/hub"
	"github.com/latent-ai/latent/internal/units"
)

func newPullCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pull MODEL",
		Short: "Download a GGUF model from Hugging Face into the local store",
		Long: `Download a GGUF model from the Hugging Face Hub into the local model store.

MODEL is hf.co/OWNER/REPO[:QUANT], OWNER/REPO:QUANT, hf.co/OWNER/REPO/FILE.gguf,
or a short name:
` + aliasTable() + `
QUANT (Q4_K_M, Q8_0, ...) is matched against the repository's file names,
ignoring case. Without one, Q4_K_M is taken, or else the nearest quantization
(Q4_K_S, Q4_0, Q5_K_M, ..., Q8_0, then BF16/F16); pull says which.

The download resumes where an interrupted one stopped (Ctrl-C is safe), its
SHA-256 is checked against the Hub's, and the file appears under its name only
when complete. Models are stored in $LATENT_MODELS, by default in latent/models
under the user cache directory (~/.cache/latent/models on Linux). HF_TOKEN is
sent to the Hub for gated or private repositories; HF_ENDPOINT points at a
mirror.`,
		Example: `  latent pull glm-4.7-flash
  latent pull hf.co/mradermacher/DeepSeek-V2-Lite-Chat-GGUF:Q8_0`,
		Args: oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[0]
			if st, err := os.Stat(ref); err == nil && !st.IsDir() {
				return fmt.Errorf("%s is a local file: pull takes a model name (hf.co/OWNER/REPO[:QUANT] or one of %s)", ref, aliasList())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			p, err := hub.Pull(ctx, ref, hub.Options{Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if p.UpToDate {
				fmt.Fprintf(out, "%s is up to date: %s\n", p.Name, p.Path)
				return nil
			}
			resumed := ""
			if p.Resumed > 0 {
				resumed = fmt.Sprintf(", resumed at %s", units.Bytes(p.Resumed))
			}
			fmt.Fprintf(out, "pulled %s (%s, %s, sha256 verified%s): %s\n", p.Name, p.Chosen, units.Bytes(p.Size), resumed, p.Path)
			return nil
		},
	}
}

// aliasTable lists the short model names, one line each.
func aliasTable() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, a := range hub.Aliases() {
		fmt.Fprintf(tw, "  %s\t%s\thf.co/%s\n", a.Name, a.Description, a.Repository)
	}
	tw.Flush()
	return b.String()
}

func aliasList() string {
	var names []string
	for _, a := range hub.Aliases() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}
