package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newSynthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "synth",
		Short: "Write a deepseek2 GGUF file with random weights",
		RunE:  func(*cobra.Command, []string) error { return errors.New("synth: not implemented yet") },
	}
}
