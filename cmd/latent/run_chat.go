package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/tokenizer"
)

// chatSession is `latent run` talking: a conversation with a loaded model
// whose cache keeps the turns so far.
type chatSession struct {
	model   engine.Model
	session *engine.Session
	tok     *tokenizer.Tokenizer
	conv    chat.Conversation
	raw     bool   // no template: the input is the text itself
	rawText string // --raw: the text so far, prompts and answers

	sampler   engine.SamplerOptions
	seedSet   bool // a fixed seed; else a fresh one every turn
	maxTokens int  // ≤ 0: no limit
	eog       []int32

	out, errOut  io.Writer
	color        bool // out is a terminal
	hideThinking bool
	verbose      bool
	chatting     bool // interactive: /clear is there to make room
}

// errTurn is a turn that could not run (a template error, a prompt past
// the context): the chat says so and goes on; a single prompt fails.
type errTurn struct{ msg string }

func (e *errTurn) Error() string { return e.msg }

// turn sends the user's text and streams the answer. Cancelling ctx stops
// the answer; what was said stays in the conversation.
func (c *chatSession) turn(ctx context.Context, text string) error {
	var (
		prompt string
		ids    []int32
		err    error
	)
	if c.raw {
		prompt = c.rawText + text
		ids = chat.PromptTokens(c.tok, prompt)
	} else {
		c.conv.Add("user", text)
		if prompt, ids, err = c.conv.Prompt(); err != nil {
			c.dropLast()
			return &errTurn{fmt.Sprintf("chat template: %v", err)}
		}
	}
	if n, ctxLen := len(ids), c.model.Context(); n >= ctxLen {
		c.dropLast()
		what := "the conversation"
		if c.raw || len(c.conv.Messages) == 0 {
			what = "the prompt"
		}
		return &errTurn{fmt.Sprintf("%s is %d tokens, and the context holds %d: %s", what, n, ctxLen, c.roomHint())}
	}

	req := engine.Request{Prompt: ids, MaxTokens: c.maxTokens, EOG: c.eog, Sampler: c.sampler.AsUserGave()}
	if !c.seedSet {
		req.Sampler.Seed = rand.Uint64()
	}
	reply := chat.NewReply(c.tok, prompt)
	show := &replyPrinter{w: c.out, color: c.color, hide: c.hideThinking}
	var all strings.Builder // --raw: the answer exactly as generated
	res, err := c.session.Generate(ctx, req, func(t engine.Token) error {
		all.WriteString(c.tok.Piece(t.ID))
		return show.print(reply.Add(t.ID))
	})
	if err == nil {
		err = show.print(reply.Flush())
	}
	if eerr := show.end(); err == nil {
		err = eerr
	}
	if err != nil {
		c.dropLast()
		return err
	}

	switch {
	case res.Generated == 0 && res.StopReason == engine.StopCancelled:
		c.dropLast() // nothing was said: as if the message was not sent
	case c.raw:
		c.rawText = prompt + all.String()
	default:
		c.conv.Messages = append(c.conv.Messages, reply.Message())
	}
	if res.StopReason == engine.StopContext {
		fmt.Fprintf(c.errOut, "the context of %d tokens is full: %s\n", c.model.Context(), c.roomHint())
	}
	if c.verbose {
		printTurnStats(c.errOut, res, req.Sampler.Seed)
	}
	return nil
}

// roomHint says how to get room in a full context.
func (c *chatSession) roomHint() string {
	if c.chatting {
		return "/clear to start over, or raise --ctx"
	}
	return "raise --ctx"
}

// dropLast takes back the user's last message.
func (c *chatSession) dropLast() {
	if !c.raw && len(c.conv.Messages) > 0 && c.conv.Messages[len(c.conv.Messages)-1].Role == "user" {
		c.conv.Messages = c.conv.Messages[:len(c.conv.Messages)-1]
	}
}

// clear forgets the conversation (the cache keeps what a new one can reuse).
func (c *chatSession) clear() {
	c.conv.Clear()
	c.rawText = ""
}

// interactive runs the chat until /bye, Ctrl-D or a second Ctrl-C at an
// empty prompt. Each interrupt on sigs stops the answer being generated.
func (c *chatSession) interactive(ctx context.Context, in lineReader, sigs <-chan os.Signal) error {
	c.chatting = true
	interrupted := false // the last input was Ctrl-C at an empty prompt
	for {
		text, typed, err := readMessage(in)
		switch {
		case errors.Is(err, errInterrupt) && text != "":
			interrupted = false // it cleared what was typed
			continue
		case errors.Is(err, errInterrupt):
			if interrupted {
				return nil
			}
			interrupted = true
			fmt.Fprintln(c.out, "(Ctrl-C again, Ctrl-D or /bye to exit)")
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		interrupted = false
		text = strings.TrimSpace(text)
		switch {
		case text == "":
			continue
		case typed && strings.HasPrefix(text, "/"): // a paste or a """ block is a message, whatever its first word
			if bye := c.command(text); bye {
				return nil
			}
			continue
		}

		turnCtx, cancel := context.WithCancel(ctx)
		drain(sigs)
		done := make(chan struct{})
		go func() {
			select {
			case <-sigs:
				cancel()
			case <-done:
			}
		}()
		restore := func() {}
		if q, ok := in.(interface{ Quiet() func() }); ok { // keys typed during the answer stay out of it
			restore = q.Quiet()
		}
		err = c.turn(turnCtx, text)
		restore()
		close(done)
		cancel()
		var te *errTurn
		switch {
		case errors.As(err, &te):
			fmt.Fprintln(c.errOut, te.msg)
		case err != nil:
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		fmt.Fprintln(c.out)
	}
}

// drain discards interrupts that arrived while no answer was running.
func drain(sigs <-chan os.Signal) {
	for {
		select {
		case <-sigs:
		default:
			return
		}
	}
}

// readMessage reads one message: a line, the lines of a paste, or the
// lines between two """ (as in ollama). typed reports a single line typed
// at the prompt, the only input that can be a /command.
func readMessage(in lineReader) (text string, typed bool, err error) {
	const fence = `"""`
	var lines []string
	prompt := ">>> "
	inFence := false
	for {
		line, pasted, err := in.ReadLine(prompt)
		if errors.Is(err, errInterrupt) {
			// Ctrl-C drops the whole message being typed.
			return strings.Join(append(lines, line), "\n"), false, err
		}
		if err != nil {
			return "", false, err
		}
		switch {
		case pasted:
			lines = append(lines, line)
			prompt = "... "
			continue
		case !inFence && len(lines) == 0 && strings.HasPrefix(line, fence):
			line = strings.TrimPrefix(line, fence)
			if strings.HasSuffix(line, fence) && len(line) >= len(fence) {
				return strings.TrimSuffix(line, fence), false, nil
			}
			inFence, prompt = true, "... "
			if line != "" {
				lines = append(lines, line)
			}
			continue
		case inFence && strings.HasSuffix(line, fence):
			return strings.Join(append(lines, strings.TrimSuffix(line, fence)), "\n"), false, nil
		case inFence:
			lines = append(lines, line)
			continue
		}
		return strings.Join(append(lines, line), "\n"), len(lines) == 0, nil
	}
}

// The /set parameters, named as in ollama's Modelfile.
var chatParameters = []struct{ name, help string }{
	{"temperature", "sampling temperature (0: greedy)"},
	{"top_k", "sample from the k most likely tokens (0: off)"},
	{"top_p", "sample from the most likely tokens holding this probability (1: off, 0: only the most likely token)"},
	{"min_p", "drop tokens less likely than this times the most likely one (0: off)"},
	{"repeat_penalty", "penalise the logits of recent tokens by this factor (1: off)"},
	{"presence_penalty", "subtract this from the logits of recent tokens (0: off)"},
	{"frequency_penalty", "subtract this times its count from the logit of each recent token (0: off)"},
	{"repeat_last_n", "recent tokens the penalties look at (0: off, -1: all)"},
	{"seed", "sampling seed (\"random\": a fresh one every answer)"},
	{"num_predict", "tokens to generate at most per answer (-1: no limit)"},
}

// command runs a /command and reports whether it was /bye.
func (c *chatSession) command(line string) (bye bool) {
	w := c.out
	args := strings.Fields(line)
	switch args[0] {
	case "/bye", "/exit":
		return true
	case "/?", "/help":
		if len(args) > 1 && (args[1] == "set" || args[1] == "/set") {
			c.setHelp()
			return false
		}
		fmt.Fprint(w, `Available commands:
  /set            Set session variables
  /show           Show session variables
  /clear          Clear the conversation
  /bye            Exit
  /?, /help       Help for a command

Use """ to begin and end a message of several lines.
Ctrl-C stops an answer; at an empty prompt, press it twice (or Ctrl-D) to exit.
`)
	case "/clear":
		c.clear()
		fmt.Fprintln(w, "Cleared the conversation.")
	case "/set":
		c.set(args[1:], line)
	case "/show":
		c.show(args[1:])
	default:
		fmt.Fprintf(w, "Unknown command '%s'. Type /? for help\n", args[0])
	}
	return false
}

func (c *chatSession) setHelp() {
	fmt.Fprint(c.out, `Available /set commands:
  /set parameter NAME VALUE   Set a sampling parameter (/set parameter lists them)
  /set system TEXT            Set the system message (clears the conversation)
  /set system                 Remove the system message
  /set think, /set nothink    Ask the template to turn thinking on or off
  /set hidethinking           Hide the reasoning of thinking models
  /set nohidethinking         Show it (dimmed)
  /set verbose, /set quiet    Show or hide timings after each answer
`)
}

func (c *chatSession) set(args []string, line string) {
	w := c.out
	if len(args) == 0 {
		c.setHelp()
		return
	}
	switch args[0] {
	case "parameter":
		if len(args) > 3 {
			fmt.Fprintf(w, "/set parameter takes a NAME and a VALUE; %q is one word too many\n", args[3])
			return
		}
		if len(args) != 3 {
			fmt.Fprintln(w, "Parameters (/set parameter NAME VALUE):")
			for _, p := range chatParameters {
				fmt.Fprintf(w, "  %-15s %s\n", p.name, p.help)
			}
			return
		}
		if err := c.setParameter(args[1], args[2]); err != nil {
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintf(w, "Set parameter '%s' to '%s'\n", args[1], args[2])
	case "system":
		// The text keeps its own spacing: everything after "system".
		text := strings.TrimSpace(line[strings.Index(line, "system")+len("system"):])
		c.conv.System = text
		c.clear()
		if text == "" {
			fmt.Fprintln(w, "Removed the system message; the conversation starts over.")
		} else {
			fmt.Fprintln(w, "Set the system message; the conversation starts over.")
		}
	case "think", "nothink":
		if c.conv.Extra == nil {
			c.conv.Extra = map[string]any{}
		}
		c.conv.Extra["enable_thinking"] = args[0] == "think"
		fmt.Fprintf(w, "Set 'enable_thinking' to %v for the template.\n", args[0] == "think")
	case "hidethinking", "nohidethinking":
		c.hideThinking = args[0] == "hidethinking"
		fmt.Fprintf(w, "Set '%s' mode.\n", args[0])
	case "verbose", "quiet":
		c.verbose = args[0] == "verbose"
		fmt.Fprintf(w, "Set '%s' mode.\n", args[0])
	default:
		fmt.Fprintf(w, "Unknown /set command '%s'. Type /set for help\n", args[0])
	}
}

// setParameter sets one sampling option, refusing a bad value.
func (c *chatSession) setParameter(name, value string) error {
	s := c.sampler
	var err error
	switch name {
	case "temperature":
		s.Temperature, err = parseFloat32(value)
	case "top_k":
		s.TopK, err = parseInt(value)
	case "top_p":
		s.TopP, err = parseFloat32(value)
	case "min_p":
		s.MinP, err = parseFloat32(value)
	case "repeat_penalty":
		s.RepeatPenalty, err = parseFloat32(value)
	case "presence_penalty":
		s.PresencePenalty, err = parseFloat32(value)
	case "frequency_penalty":
		s.FrequencyPenalty, err = parseFloat32(value)
	case "repeat_last_n":
		s.RepeatLastN, err = parseInt(value)
	case "seed":
		if value == "random" {
			c.seedSet = false
			return nil
		}
		var v uint64
		if v, err = strconv.ParseUint(value, 10, 64); err == nil {
			s.Seed, c.seedSet = v, true
		}
	case "num_predict":
		var n int
		if n, err = parseInt(value); err == nil && (n == 0 || n < -1) {
			return fmt.Errorf("num_predict %d: give a positive count, or -1 for no limit", n)
		}
		if err == nil {
			c.maxTokens = n
		}
	default:
		return fmt.Errorf("Unknown parameter '%s'. Type /set parameter for the list", name)
	}
	if err != nil {
		return fmt.Errorf("%s: %q is not a number", name, value)
	}
	if err := s.Validate(); err != nil {
		// The message starts with the flag's name; here the names are ollama's.
		msg := err.Error()
		name, rest, _ := strings.Cut(msg, " ")
		return errors.New(strings.ReplaceAll(name, "-", "_") + " " + rest)
	}
	c.sampler = s
	return nil
}

// parseFloat32 and parseInt read a whole value (fmt.Sscan took "0.3abc"
// for 0.3).
func parseFloat32(s string) (float32, error) {
	v, err := strconv.ParseFloat(s, 32)
	return float32(v), err
}

func parseInt(s string) (int, error) {
	return strconv.Atoi(s)
}

func (c *chatSession) show(args []string) {
	w := c.out
	what := ""
	if len(args) > 0 {
		what = args[0]
	}
	switch what {
	case "parameters":
		s := c.sampler
		seed := "random"
		if c.seedSet {
			seed = fmt.Sprint(s.Seed)
		}
		n := fmt.Sprint(c.maxTokens)
		if c.maxTokens <= 0 {
			n = "-1"
		}
		fmt.Fprintf(w, "temperature        %g\ntop_k              %d\ntop_p              %g\nmin_p              %g\nrepeat_penalty     %g\npresence_penalty   %g\nfrequency_penalty  %g\nrepeat_last_n      %d\nseed               %s\nnum_predict        %s\n",
			s.Temperature, s.TopK, s.TopP, s.MinP, s.RepeatPenalty, s.PresencePenalty, s.FrequencyPenalty, s.RepeatLastN, seed, n)
	case "system":
		if c.conv.System == "" {
			fmt.Fprintln(w, "No system message.")
		} else {
			fmt.Fprintln(w, c.conv.System)
		}
	default:
		if len(args) > 0 {
			fmt.Fprintf(w, "Unknown /show command '%s'.\n", args[0])
		}
		fmt.Fprint(w, "Available /show commands:\n  /show parameters   The sampling parameters\n  /show system       The system message\n")
	}
}

// printTurnStats prints what --verbose shows after an answer.
func printTurnStats(w io.Writer, r *engine.Result, seed uint64) {
	fmt.Fprintf(w, "seed      %d\n", seed)
	cached := ""
	if r.Cached > 0 {
		cached = fmt.Sprintf(" (%d cached)", r.Cached)
	}
	fmt.Fprintf(w, "prompt    %d tokens%s, %.1f tokens/s, first token after %.3f s\n", r.PromptTokens, cached, r.PromptRate(), r.PrefillDuration.Seconds())
	fmt.Fprintf(w, "generate  %d tokens, %.1f tokens/s after the first, stop: %s\n", r.Generated, r.DecodeRate(), r.StopReason)
}

func printLoadTime(w io.Writer, d time.Duration) {
	fmt.Fprintf(w, "load      %.3f s\n", d.Seconds())
}
