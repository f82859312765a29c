package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/hub"
	"github.com/latent-ai/latent/model"
)

func newRunCmd() *cobra.Command {
	var (
		o        runOptions
		sampling = engine.DefaultSamplerOptions()
	)
	o.sampler = &sampling
	cmd := &cobra.Command{
		Use:   "run MODEL [PROMPT...]",
		Short: "Chat with a model, answer one prompt, or generate token ids after --prompt-tokens",
		Long: `Chat with a model in the terminal, or answer one prompt and exit.

MODEL is a .gguf file or a model reference (hf.co/OWNER/REPO[:QUANT], OWNER/REPO:QUANT or an
alias), pulled into the local store on first use. Without PROMPT and with a terminal on stdin,
latent run starts a chat: type a message, /? for help, Ctrl-C to stop an answer, /bye or Ctrl-D
to leave. With PROMPT, or with text piped to stdin, it answers once and exits (piped text
follows the PROMPT after a blank line).

With --prompt-tokens it generates after a prompt of token ids and prints the generated ids.`,
		Example: `  latent run model.gguf
  latent run model.gguf "Why is the sky blue?"
  git diff | latent run model.gguf "Write a commit message for this change:"
  latent run model.gguf --prompt-tokens 1017,706,44 -n 16 --temperature 0`,
		Args: someArgs("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.n == 0 || o.n < -1 {
				return fmt.Errorf("-n %d: give a positive count, or -1 for no limit", o.n)
			}
			o.seedSet = cmd.Flags().Changed("seed")
			o.thinkSet = cmd.Flags().Changed("think")
			if !o.seedSet {
				// llama.cpp's default too: a fresh seed, shown by --verbose.
				o.sampler.Seed = rand.Uint64()
			}
			if err := o.sampler.Validate(); err != nil {
				return fmt.Errorf("--%w", err) // the messages start with the flag's name
			}
			if cmd.Flags().Changed("prompt-tokens") {
				if len(args) > 1 {
					return fmt.Errorf("give the prompt as --prompt-tokens or as text, not both")
				}
				return runTokens(cmd, args[0], &o)
			}
			if len(o.stops) > 0 {
				return fmt.Errorf("--stop takes token ids and goes with --prompt-tokens")
			}
			return runText(cmd, args[0], args[1:], &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.promptTokens, "prompt-tokens", "", "prompt token ids, comma-separated (nothing is added: include BOS yourself); prints the generated ids")
	f.IntVarP(&o.n, "n-predict", "n", -1, "tokens to generate at most in an answer (-1: until the end of generation or a full context)")
	f.Float32Var(&sampling.Temperature, "temperature", sampling.Temperature, "sampling temperature (0: greedy)")
	f.IntVar(&sampling.TopK, "top-k", sampling.TopK, "sample from the k most likely tokens (0: off)")
	f.Float32Var(&sampling.TopP, "top-p", sampling.TopP, "sample from the most likely tokens holding this probability (1: off, 0: only the most likely token)")
	f.Float32Var(&sampling.MinP, "min-p", sampling.MinP, "drop tokens less likely than this times the most likely one (0: off)")
	f.Float32Var(&sampling.RepeatPenalty, "repeat-penalty", sampling.RepeatPenalty, "penalise the logits of recent tokens by this factor (1: off)")
	f.Float32Var(&sampling.PresencePenalty, "presence-penalty", sampling.PresencePenalty, "subtract this from the logits of recent tokens (0: off)")
	f.Float32Var(&sampling.FrequencyPenalty, "frequency-penalty", sampling.FrequencyPenalty, "subtract this times its count from the logit of each recent token (0: off)")
	f.IntVar(&sampling.RepeatLastN, "repeat-last-n", sampling.RepeatLastN, "recent tokens the penalties look at (0: off, -1: all)")
	f.Uint64Var(&sampling.Seed, "seed", 0, "sampling seed (default: a random one, a new one for every answer)")
	f.StringArrayVar(&o.stops, "stop", nil, "with --prompt-tokens: stop when the output ends with these token ids, comma-separated (repeatable; not printed)")
	f.BoolVar(&o.ignoreEOS, "ignore-eos", false, "do not stop at the model's end-of-generation tokens")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print load time, seed, prompt and generation speeds to stderr")
	f.BoolVar(&o.raw, "raw", false, "no chat template: the model reads the text as it is (each chat line continues it)")
	f.BoolVar(&o.hideThinking, "hide-thinking", false, "do not show the reasoning of thinking models (<think>…</think>)")
	f.StringVar(&o.system, "system", "", "system message that opens the conversation")
	f.BoolVar(&o.think, "think", true, "with --think=false, ask the chat template to turn thinking off (enable_thinking)")
	addLoadFlags(cmd, &o.load)
	return cmd
}

// runOptions are latent run's flags.
type runOptions struct {
	promptTokens string
	stops        []string
	n            int
	sampler      *engine.SamplerOptions
	seedSet      bool
	ignoreEOS    bool
	verbose      bool
	raw          bool
	hideThinking bool
	system       string
	think        bool
	thinkSet     bool // --think was given
	load         model.Options
}

// runTokens generates after a prompt of token ids, printing the ids.
func runTokens(cmd *cobra.Command, ref string, o *runOptions) error {
	req := engine.Request{MaxTokens: o.n, Sampler: o.sampler.AsUserGave()}
	var err error
	if req.Prompt, err = parseTokens("--prompt-tokens", o.promptTokens, true); err != nil {
		return err
	}
	for _, s := range o.stops {
		seq, err := parseTokens("--stop", s, true)
		if err != nil {
			return err
		}
		req.Stop = append(req.Stop, seq)
	}
	load := o.load
	load.Tokenizer = !o.ignoreEOS // for the end-of-generation ids
	lm, loaded, err := loadRef(cmd, ref, load)
	if err != nil {
		return err
	}
	defer lm.Close()
	if !o.ignoreEOS {
		tok, err := lm.Tokenizer()
		if err != nil {
			return err // it names the file
		}
		req.EOG = tok.EOG()
	}

	// Ctrl-C ends the generation, not the process: what was
	// generated stays printed and the line is finished.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	out, sep := cmd.OutOrStdout(), ""
	res, err := engine.Generate(ctx, lm.Model, req, func(t engine.Token) error {
		_, err := fmt.Fprintf(out, "%s%d", sep, t.ID)
		sep = " "
		return err
	})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out); err != nil {
		return err
	}
	errOut := cmd.ErrOrStderr()
	if res.StopReason == engine.StopContext {
		fmt.Fprintf(errOut, "stopped: the context of %d tokens is full (raise --ctx)\n", lm.Model.Context())
	}
	if o.verbose {
		printRunStats(errOut, res, loaded, req.Sampler.Seed)
	}
	return interrupted(cmd, ctx)
}

// loadRef resolves a model reference (pulling it on first use, with
// progress on stderr) and loads it, returning the time the load took.
func loadRef(cmd *cobra.Command, ref string, opts model.Options) (*model.Loaded, time.Duration, error) {
	path, err := resolveModel(cmd, ref)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	loadOpts, clearMeter := startLoadMeter(cmd, opts)
	lm, err := model.Load(path, loadOpts)
	clearMeter()
	if err != nil {
		return nil, 0, err
	}
	return lm, time.Since(start), nil
}

// runText answers prompt once, or chats when there is none and stdin is a
// terminal.
func runText(cmd *cobra.Command, ref string, args []string, o *runOptions) error {
	if _, err := hub.CheckPath(ref); err != nil { // before asking for a prompt
		return err
	}
	stdin, interactive := terminalFile(cmd.InOrStdin())
	prompt := strings.Join(args, " ")
	if !interactive {
		piped, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if text := strings.TrimSpace(string(piped)); text != "" && prompt != "" {
			prompt += "\n\n" + text
		} else if text != "" {
			prompt = text
		}
		if prompt == "" {
			return fmt.Errorf("no prompt: give one after the model, pipe one to stdin, or run in a terminal to chat")
		}
	}
	interactive = interactive && prompt == ""

	load := o.load
	load.Tokenizer = true
	lm, loaded, err := loadRef(cmd, ref, load)
	if err != nil {
		return err
	}
	defer lm.Close()
	c, err := newChatSession(cmd, lm, o)
	if err != nil {
		return err
	}
	if o.verbose {
		printLoadTime(c.errOut, loaded)
		if c.conv.Template != nil && c.conv.Template.Default {
			fmt.Fprintln(c.errOut, "template  none in the model file: ChatML")
		}
	}

	if !interactive {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
		defer stop()
		if err := c.turn(ctx, prompt); err != nil {
			return err
		}
		return interrupted(cmd, ctx)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	return c.interactive(cmd.Context(), newTermReader(stdin, c.out), sigs)
}

// newChatSession prepares a conversation with a loaded model.
func newChatSession(cmd *cobra.Command, lm *model.Loaded, o *runOptions) (*chatSession, error) {
	tok, err := lm.Tokenizer()
	if err != nil {
		return nil, err // it names the file
	}
	out := cmd.OutOrStdout()
	_, tty := terminalFile(out)
	c := &chatSession{
		model:        lm.Model,
		session:      engine.NewSession(lm.Model),
		tok:          tok,
		raw:          o.raw,
		sampler:      *o.sampler,
		seedSet:      o.seedSet,
		maxTokens:    o.n,
		out:          out,
		errOut:       cmd.ErrOrStderr(),
		color:        tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb",
		hideThinking: o.hideThinking,
		verbose:      o.verbose,
	}
	c.conv.Tokenizer, c.conv.System = tok, o.system
	if o.thinkSet {
		c.conv.Extra = map[string]any{"enable_thinking": o.think}
	}
	if !o.raw {
		if c.conv.Template, err = chat.FromGGUF(lm.File); err != nil {
			return nil, fmt.Errorf("%s: chat template: %w", lm.File.Name, err)
		}
	}
	if !o.ignoreEOS {
		c.eog = tok.EOG()
	}
	return c, nil
}

func printRunStats(w io.Writer, r *engine.Result, load time.Duration, seed uint64) {
	printLoadTime(w, load)
	printTurnStats(w, r, seed)
}

// resolveModel turns a command's MODEL argument into a file: a .gguf path as
// it is, or a model reference (hf.co/OWNER/REPO[:QUANT], a short name) from
// the store, pulled on first use as latent run does, with progress on stderr.
func resolveModel(cmd *cobra.Command, ref string) (string, error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	return hub.Resolve(ctx, ref, hub.Options{Progress: cmd.ErrOrStderr()})
}

// interrupted is errInterrupted when Ctrl-C (ctx, which SIGINT cancels)
// ended the command's answer, not the command's own context.
func interrupted(cmd *cobra.Command, ctx context.Context) error {
	if ctx.Err() != nil && cmd.Context().Err() == nil {
		return errInterrupted
	}
	return nil
}
