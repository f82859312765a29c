package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/hub"
	"github.com/latent-ai/latent/internal/units"
)

func newListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the models in the local store",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			models, err := hub.List(hub.Options{})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if models == nil {
					models = []hub.Local{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(models)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 4, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSIZE\tMODIFIED")
			now := time.Now()
			for _, m := range models {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, units.Bytes(m.Size), ago(now.Sub(m.Modified)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(models) == 0 {
				if dir, err := hub.StoreDir(hub.Options{}); err == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "no models in %s yet: latent pull %s\n", dir, hub.Aliases()[0].Name)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts (name, path, size, modified, sha256)")
	return cmd
}

// ago says how long ago something happened, as ollama list does.
func ago(d time.Duration) string {
	plural := func(n int, unit string) string {
		if n == 1 {
			if unit == "hour" {
				return "An hour ago"
			}
			return "1 " + unit + " ago"
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Minute:
		return "Less than a minute ago"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour")
	case d < 30*24*time.Hour:
		return plural(int(d/(24*time.Hour)), "day")
	case d < 365*24*time.Hour:
		return plural(int(d/(30*24*time.Hour)), "month")
	}
	return plural(int(d/(365*24*time.Hour)), "year")
}
