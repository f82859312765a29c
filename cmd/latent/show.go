package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show MODEL",
		Short: "Describe a GGUF model file",
		RunE:  func(*cobra.Command, []string) error { return errors.New("show: not implemented yet") },
	}
}
