package main

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/backend/cuda"
	"github.com/latent-ai/latent/model"
)

func newProfileCmd() *cobra.Command {
	var (
		depth, top int
		each       bool
		opts       model.Options
	)
	cmd := &cobra.Command{
		Use:   "profile MODEL [--depth N] [--top 15] [--each]",
		Short: "Time every GPU kernel of one decode step: time, bytes moved, GB/s and share of the step",
		Args:  oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if depth < 0 || top < 0 {
				return fmt.Errorf("--depth %d, --top %d: must not be negative", depth, top)
			}
			if depth > maxBenchTokens {
				return fmt.Errorf("--depth %d: more than %d tokens", depth, maxBenchTokens)
			}
			if err := cuda.Available(); err != nil {
				return fmt.Errorf("profile times CUDA kernels and needs an NVIDIA GPU (latent bench --backend cpu measures the CPU): %w", err)
			}
			opts.Backend = "cuda"
			opts.Context = depth + 2 // the depth, a step to warm up and the profiled one
			start := time.Now()
			lm, err := loadWithin(cmd, args[0], opts, fmt.Sprintf("--depth %d needs a context of %d tokens", depth, opts.Context))
			if err != nil {
				return err
			}
			defer lm.Close()
			loaded := time.Since(start)
			be := lm.Backend.(*cuda.Backend)
			m := lm.Model
			// fill the cache to the depth asked for, then warm up one step
			prompt := make([]int32, depth+1)
			for i := range prompt {
				prompt[i] = int32((i*7919 + 1) % m.Vocab())
			}
			if _, err := m.Forward(prompt, false); err != nil {
				return err
			}
			var ferr error
			times, err := be.Profile(func() { _, ferr = m.Forward([]int32{1}, false) })
			if err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
			c := be.Compiled()
			info := be.Device()
			w := cmd.OutOrStdout()
			later := ""
			if c.Later > 0 {
				later = fmt.Sprintf("; %d more in the background", c.Later)
			}
			compiled := fmt.Sprintf("kernels compiled in %.3f s", c.Seconds)
			if c.Ahead > 0 {
				compiled = fmt.Sprintf("kernels compiled in %.3f s beside the upload, the load waiting %.3f s more for them", c.Span, c.Seconds)
			}
			fmt.Fprintf(w, "%s: %s, decode step at depth %d, %d kernels; loaded in %.2f s; %s (%d of %d modules from the cache, %d queued with the upload%s)\n",
				args[0], info.Name, depth, len(times), loaded.Seconds(), compiled, c.Cached, c.Modules, c.Ahead, later)
			u := be.Uploaded()
			fmt.Fprintf(w, "weights: %.2f GB, %.2f s on the host (checks, repacking), %.2f s copying to the device; the device opened in %.2f s\n", float64(u.Bytes)/1e9, u.Host, u.Copy, be.Opened())
			printProfile(w, times, top, each)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&depth, "depth", 0, "tokens in the cache before the profiled step")
	f.IntVar(&top, "top", 15, "kernels to list in the summary (0: all)")
	f.BoolVar(&each, "each", false, "also list every launch in order")
	return cmd
}

// printProfile writes the kernels grouped by name (heaviest first) and,
// with each, every launch in order.
func printProfile(w io.Writer, times []cuda.KernelTime, top int, each bool) {
	var total float64
	for _, t := range times {
		total += t.Seconds
	}
	type group struct {
		name  string
		n     int
		sec   float64
		bytes int64
	}
	byName := map[string]*group{}
	var groups []*group
	for _, t := range times {
		g := byName[t.Name]
		if g == nil {
			g = &group{name: t.Name}
			byName[t.Name] = g
			groups = append(groups, g)
		}
		g.n++
		g.sec += t.Seconds
		g.bytes += t.Bytes
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].sec > groups[j].sec })
	if top > 0 && len(groups) > top {
		groups = groups[:top]
	}
	gbs := func(b int64, s float64) float64 {
		if s <= 0 {
			return 0
		}
		return float64(b) / s / 1e9
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "kernel\tlaunches\ttime µs\tMB\tGB/s\tshare\t\n")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.0f\t%.1f%%\t\n", g.name, g.n, g.sec*1e6, float64(g.bytes)/1e6, gbs(g.bytes, g.sec), 100*g.sec/total)
	}
	var bytes int64
	for _, t := range times {
		bytes += t.Bytes
	}
	fmt.Fprintf(tw, "step\t%d\t%.1f\t%.2f\t%.0f\t100%%\t\n", len(times), total*1e6, float64(bytes)/1e6, gbs(bytes, total))
	tw.Flush()
	if !each {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "#\tkernel\ttime µs\tMB\tGB/s\tshare\t\n")
	for i, t := range times {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.3f\t%.0f\t%.2f%%\t\n", i, t.Name, t.Seconds*1e6, float64(t.Bytes)/1e6, gbs(t.Bytes, t.Seconds), 100*t.Seconds/total)
	}
	tw.Flush()
}
