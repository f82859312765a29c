// Command latent runs MLA mixture-of-experts language models stored as GGUF.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/hub"
	"github.com/spf13/cobra"
)

// version is set at link time for releases (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	root := newRootCmd()
	err := root.Execute()
	if err != nil && !errors.Is(err, errInterrupted) {
		fmt.Fprintf(os.Stderr, "latent: %v\n", err)
	}
	os.Exit(exitCode(err))
}

// errInterrupted ends a command that Ctrl-C cut short after it printed what
// it had: no message, and the exit code of a process SIGINT ended (130, as
// llama.cpp's), so that scripts can tell it from a finished answer.
var errInterrupted = errors.New("interrupted")

// exitCode is the process's exit code for a command's error.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errInterrupted):
		return 130
	}
	return 1
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

// oneArg is cobra.ExactArgs(1) with errors that name the argument and show
// how the command reads: "give a model: latent show MODEL".
func oneArg(noun string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return someArgs(noun)(cmd, args)
		case len(args) > 1:
			return fmt.Errorf("%s takes one %s, not %d (%s): %s", cmd.CommandPath(), noun, len(args), strings.Join(args, " "), usage(cmd))
		}
		return nil
	}
}

// someArgs is cobra.MinimumNArgs(1) with oneArg's message for none.
func someArgs(noun string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("give a %s: %s", noun, usage(cmd))
		}
		return nil
	}
}

// usage is the command's Use line under its full name.
func usage(cmd *cobra.Command) string {
	return cmd.CommandPath() + strings.TrimPrefix(cmd.Use, cmd.Name())
}

// openStored opens a model file, or a model in the store, without ever
// downloading it (hub.Find).
func openStored(ref string) (*gguf.File, error) {
	path, err := hub.Find(ref, hub.Options{})
	if err != nil {
		return nil, err
	}
	return gguf.Open(path)
}
