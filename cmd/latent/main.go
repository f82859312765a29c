// Command latent runs MLA mixture-of-experts language models stored as GGUF.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at link time for releases (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "latent: %v\n", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "latent",
		Short:         "Run MLA and mixture-of-experts language models (the deepseek2 family) stored as GGUF",
		Version:       version,
		SilenceUsage:  true, // a failed command prints one line, not its usage
		SilenceErrors: true, // main prints the error once
	}
	root.AddCommand(
		newShowCmd(),
		newSynthCmd(),
		newLogitsCmd(),
		newRunCmd(),
		newBenchCmd(),
		newProfileCmd(),
		newChatTemplateCmd(),
		newTokenizeCmd(),
		newServeCmd(),
		newPullCmd(),
		newListCmd(),
		newRmCmd(),
	)
	return root
}
