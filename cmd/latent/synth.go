package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/internal/units"
	"github.com/latent-ai/latent/synth"
)

func newSynthCmd() *cobra.Command {
	var (
		preset, format, out, templateFile string
		seed                              uint64
		layers                            int
		legacy, mtp, list                 bool
	)
	cmd := &cobra.Command{
		Use:   "synth --preset NAME -o OUT.gguf",
		Short: "Write a deepseek2 GGUF file with random weights",
		Long: `Write a deepseek2 GGUF file with random weights at the shape of a real model
(or a tiny test model): the same tensor names, shapes, types and metadata as a
real conversion, a byte-level BPE vocabulary, and weights drawn so activations
stay near unit scale. The same options and seed give the same bytes.

Presets:
` + presetTable() + `
Weight types: ` + synth.FormatNames() + `. q4_0 keeps output.weight at Q6_K;
q4_k_m is Q4_K with Q6_K down projections and output, Q5_K shared experts and
Q8_0 where a row is not a whole number of 256-blocks.`,
		Example: `  latent synth --preset glm-4.7-flash --type q4_0 -o glm-4.7-flash-q4_0.gguf
  latent synth --preset tiny-dsv2 --type f32 --legacy-kv-b -o tiny.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				fmt.Fprint(cmd.OutOrStdout(), presetTable())
				return nil
			}
			if preset == "" {
				return fmt.Errorf("synth: --preset is required (valid: %s)", synth.PresetNames())
			}
			if out == "" {
				return errors.New("synth: --output (-o) is required")
			}
			opts := synth.Options{Preset: preset, Seed: seed, LegacyKVB: legacy, MTP: mtp}
			f, err := synth.ParseFormat(format)
			if err != nil {
				return fmt.Errorf("synth: %w", err)
			}
			opts.Format = f
			if cmd.Flags().Changed("layers") {
				if layers < 1 || layers > synth.MaxLayers {
					return fmt.Errorf("synth: --layers %d is out of range (valid: 1 to %d)", layers, synth.MaxLayers)
				}
				opts.Layers = layers
			}
			if templateFile != "" {
				b, err := os.ReadFile(templateFile)
				if err != nil {
					return fmt.Errorf("synth: chat template: %w", err)
				}
				if len(b) == 0 {
					return fmt.Errorf("synth: chat template %s is empty", templateFile)
				}
				opts.ChatTemplate = string(b)
			}
			return runSynth(cmd.Context(), cmd.ErrOrStderr(), out, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&preset, "preset", "p", "", "model shape to write (see --list)")
	fl.StringVarP(&format, "type", "t", "q4_0", "weight type: "+synth.FormatNames())
	fl.StringVarP(&out, "output", "o", "", "file to write (replaced atomically)")
	fl.Uint64Var(&seed, "seed", 1, "random seed: the same seed writes the same bytes")
	fl.IntVar(&layers, "layers", 0, "decoder layers (default: the preset's)")
	fl.BoolVar(&legacy, "legacy-kv-b", false, "write one combined attn_kv_b per layer, as older conversions do")
	fl.BoolVar(&mtp, "mtp", false, "append a multi-token-prediction (NextN) block after the decoder")
	fl.StringVar(&templateFile, "chat-template", "", "file whose text becomes tokenizer.chat_template")
	fl.BoolVar(&list, "list", false, "list the presets and exit")
	return cmd
}

// presetTable lists the presets, one line each.
func presetTable() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, p := range synth.Presets() {
		fmt.Fprintf(tw, "  %s\t%s\n", p.Name, p.Description)
	}
	tw.Flush()
	return b.String()
}

func runSynth(ctx context.Context, stderr io.Writer, out string, opts synth.Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := synth.Plan(opts)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	start := time.Now()
	_, tty := terminalFile(stderr)
	if tty {
		var last time.Time
		m.Options.Progress = func(done, total int64) {
			if now := time.Now(); now.Sub(last) >= 200*time.Millisecond || done == total {
				last = now
				el := now.Sub(start).Seconds()
				rate := float64(done) / max(el, 1e-9)
				eta := ""
				if done > 0 && done < total {
					eta = fmt.Sprintf("  %.0f s left", float64(total-done)/rate)
				}
				fmt.Fprintf(stderr, "\r%5.1f%%  %s / %s  %s/s%s\x1b[K", 100*float64(done)/float64(max(total, 1)),
					units.Bytes(done), units.Bytes(total), units.Bytes(int64(rate)), eta)
			}
		}
	}
	n, err := m.WriteFile(ctx, out)
	if tty {
		fmt.Fprint(stderr, "\r\x1b[K")
	}
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	el := time.Since(start)
	layers := fmt.Sprintf("%d layers", m.Config.DecoderLayers())
	if m.Config.NextN > 0 {
		layers += fmt.Sprintf(" + %d MTP", m.Config.NextN)
	}
	fmt.Fprintf(stderr, "wrote %s: %s %s, %s, %d tensors, %s in %.1f s (%s/s)\n",
		out, m.Preset.Name, m.Options.Format, layers, len(m.Tensors), units.Bytes(n), el.Seconds(),
		units.Bytes(int64(float64(n)/max(el.Seconds(), 1e-9))))
	return nil
}
