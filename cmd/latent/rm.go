package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/hub"
)

func newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm MODEL...",
		Short: "Remove models from the local store (with their partial downloads)",
		Long: `Remove models from the local store, as latent list names them, with their
checksum files and any partial downloads. Files outside the store are never
touched. A repository reference without :QUANT removes its only stored model;
when several are stored, name one.`,
		Example: `  latent rm hf.co/bartowski/zai-org_GLM-4.7-Flash-GGUF:Q4_K_M
  latent rm glm-4.7-flash`,
		Args: someArgs("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, ref := range args {
				removed, err := hub.Remove(ref, hub.Options{})
				if err != nil {
					return err
				}
				for _, p := range removed {
					fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", p)
				}
			}
			return nil
		},
	}
}
