package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/engine"
	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/tokenizer"
)

// glmChatModel is the golden tiny GLM model with GLM-4.7-Flash's chat
// template: its vocabulary has the template's special tokens.
func glmChatModel(t *testing.T) string {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join(goldenDir, "templates", "GLM-4.7-Flash.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return withMetadata(t, "tiny-glm-f32", map[string]gguf.Value{"tokenizer.chat_template": gguf.String(string(tmpl))})
}

// scriptLine is one answer of a scripted lineReader.
type scriptLine struct {
	text   string
	pasted bool
	err    error
	before func() // runs when the line is read
}

// scriptReader is the keyboard of an in-process chat.
type scriptReader struct {
	lines   []scriptLine
	prompts []string
}

func (r *scriptReader) ReadLine(prompt string) (string, bool, error) {
	r.prompts = append(r.prompts, prompt)
	if len(r.lines) == 0 {
		return "", false, io.EOF
	}
	l := r.lines[0]
	r.lines = r.lines[1:]
	if l.before != nil {
		l.before()
	}
	return l.text, l.pasted, l.err
}

func lines(s ...string) []scriptLine {
	var out []scriptLine
	for _, x := range s {
		out = append(out, scriptLine{text: x})
	}
	return out
}

// testChat is a chat session on a model, printing into buffers.
type testChat struct {
	*chatSession
	lm          *model.Loaded
	out, errOut *bytes.Buffer
}

func newTestChat(t *testing.T, path string, ctx int, edit func(*runOptions)) *testChat {
	t.Helper()
	s := engine.DefaultSamplerOptions()
	s.Temperature = 0
	o := runOptions{n: -1, sampler: &s, seedSet: true, verbose: true, load: model.Options{Backend: "cpu", Context: ctx}}
	if edit != nil {
		edit(&o)
	}
	lm, err := model.Load(path, o.load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	tc := &testChat{lm: lm, out: new(bytes.Buffer), errOut: new(bytes.Buffer)}
	cmd := &cobra.Command{}
	cmd.SetOut(tc.out)
	cmd.SetErr(tc.errOut)
	if tc.chatSession, err = newChatSession(cmd, lm, &o); err != nil {
		t.Fatal(err)
	}
	return tc
}

func (c *testChat) run(t *testing.T, in lineReader, sigs chan os.Signal) {
	t.Helper()
	if sigs == nil {
		sigs = make(chan os.Signal, 1)
	}
	if err := c.interactive(context.Background(), in, sigs); err != nil {
		t.Fatalf("chat: %v\nstdout:\n%s\nstderr:\n%s", err, c.out, c.errOut)
	}
}

var promptStats = regexp.MustCompile(`prompt +(\d+) tokens(?: \((\d+) cached\))?`)

// turnPrompts reads the prompt sizes and cached counts from --verbose.
func turnPrompts(t *testing.T, stderr string) (sizes, cached []int) {
	t.Helper()
	for _, m := range promptStats.FindAllStringSubmatch(stderr, -1) {
		n, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		sizes, cached = append(sizes, n), append(cached, c)
	}
	return sizes, cached
}

// Each turn's prompt is the template's rendering of the whole conversation,
// the answers as they were printed, and the cache holds it.
func TestChatRemembersTheConversation(t *testing.T) {
	c := newTestChat(t, glmChatModel(t), 0, func(o *runOptions) { o.system = "Be brief." })
	c.run(t, &scriptReader{lines: lines("/set nothink", "/set parameter num_predict 8", "Hello", "And again")}, nil)

	msgs := c.conv.Messages
	if len(msgs) != 4 || msgs[0].Content != "Hello" || msgs[2].Content != "And again" || msgs[1].Role != "assistant" || msgs[3].Role != "assistant" {
		t.Fatalf("conversation %+v", msgs)
	}
	for _, m := range []chat.Message{msgs[1], msgs[3]} {
		if m.Content == "" || !strings.Contains(c.out.String(), m.Content) {
			t.Errorf("answer %q is not what was printed:\n%s", m.Content, c.out)
		}
	}

	// What the second turn had to say, rendered independently of the chat.
	tmpl, err := chat.FromGGUF(c.lm.File)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(c.lm.File)
	if err != nil {
		t.Fatal(err)
	}
	render := func(msgs []chat.Message) []int32 {
		text, err := tmpl.Render(chat.Input{Messages: append([]chat.Message{{Role: "system", Content: "Be brief."}}, msgs...),
			AddGenerationPrompt: true, Extra: map[string]any{"enable_thinking": false}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(text, "[gMASK]<sop><|system|>Be brief.<|user|>Hello") || !strings.HasSuffix(text, "<|assistant|></think>") {
			t.Fatalf("rendered %q", text)
		}
		return chat.PromptTokens(tok, text)
	}
	first, second := render(msgs[:1]), render(msgs[:3])
	cache := c.session.Tokens()
	if len(cache) < len(second) || !slices.Equal(cache[:len(second)], second) {
		t.Errorf("the cache does not begin with the second prompt\n%v\n%v", cache, second)
	}
	if text := tok.Decode(second); !strings.Contains(text, "Hello") || !strings.Contains(text, strings.TrimSpace(msgs[1].Content)) {
		t.Errorf("the second prompt lacks the first turn: %q", text)
	}
	sizes, cached := turnPrompts(t, c.errOut.String())
	if !slices.Equal(sizes, []int{len(first), len(second)}) || cached[0] != 0 || cached[1] < len(first) {
		t.Errorf("prompts of %v tokens, %v cached; want %d then %d, the first all cached", sizes, cached, len(first), len(second))
	}
}

// signalOnWrite is a stdout that, once armed, raises the chat's interrupt
// at the first answer text, as Ctrl-C would.
type signalOnWrite struct {
	bytes.Buffer
	sigs  chan os.Signal
	armed bool
}

func (w *signalOnWrite) Write(p []byte) (int, error) {
	if w.armed {
		w.armed = false
		w.sigs <- os.Interrupt
		time.Sleep(300 * time.Millisecond) // let the chat cancel the answer
	}
	return w.Buffer.Write(p)
}

// WriteString hides the Buffer's, which io.WriteString would call.
func (w *signalOnWrite) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

func TestChatInterruptStopsTheAnswerOnly(t *testing.T) {
	c := newTestChat(t, glmChatModel(t), 0, func(o *runOptions) { o.ignoreEOS = true })
	sigs := make(chan os.Signal, 1)
	out := &signalOnWrite{sigs: sigs}
	c.chatSession.out = out
	sigs <- os.Interrupt // one that came at the prompt: it must not stop the next answer
	script := []scriptLine{
		{text: "/set nothink"},
		{text: "Tell me a long story", before: func() { out.armed = true }},
		{text: "/set parameter num_predict 2"},
		{text: "Next"},
	}
	c.run(t, &scriptReader{lines: script}, sigs)

	stderr := c.errOut.String()
	if !regexp.MustCompile(`stop: cancelled\n(.|\n)*generate +2 tokens, .*stop: length\n`).MatchString(stderr) {
		t.Errorf("the answers did not stop as cancelled, then at the limit:\n%s", stderr)
	}
	msgs := c.conv.Messages
	if len(msgs) != 4 || msgs[1].Role != "assistant" || msgs[1].Content == "" || msgs[2].Content != "Next" {
		t.Errorf("conversation after the interrupted answer: %+v", msgs)
	}

	// Cancelled before a token: as if the message was never sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.turn(ctx, "ignored"); err != nil || len(c.conv.Messages) != 4 {
		t.Errorf("turn cancelled before the start: %v, %d messages", err, len(c.conv.Messages))
	}
}

func TestChatCommands(t *testing.T) {
	c := newTestChat(t, goldenModel("tiny-glm-f32"), 0, func(o *runOptions) { o.verbose = false })
	c.conv.Add("user", "earlier")
	tests := []struct {
		line  string
		want  string // printed
		check func() bool
	}{
		{"/?", "/set            Set session variables", nil},
		{"/help set", "/set parameter NAME VALUE", nil},
		{"/set", "Available /set commands:", nil},
		{"/set parameter", "num_predict", nil},
		{"/set parameter temperature 0.7", "Set parameter 'temperature' to '0.7'", func() bool { return c.sampler.Temperature == 0.7 }},
		{"/set parameter temperature NaN", "temperature NaN is not a finite number", func() bool { return c.sampler.Temperature == 0.7 }},
		{"/set parameter top_k 5", "Set parameter 'top_k' to '5'", func() bool { return c.sampler.TopK == 5 }},
		{"/set parameter top_k -1", "top_k -1 is negative", func() bool { return c.sampler.TopK == 5 }},
		{"/set parameter top_p x", `top_p: "x" is not a number`, nil},
		{"/set parameter temperature 0.3abc", `temperature: "0.3abc" is not a number`, func() bool { return c.sampler.Temperature == 0.7 }},
		{"/set parameter top_k 5x", `top_k: "5x" is not a number`, func() bool { return c.sampler.TopK == 5 }},
		{"/set parameter min_p 0.1", "Set parameter 'min_p'", func() bool { return c.sampler.MinP == 0.1 }},
		{"/set parameter repeat_penalty 1.1", "Set parameter", func() bool { return c.sampler.RepeatPenalty == 1.1 }},
		{"/set parameter repeat_last_n -5", "repeat_last_n -5 is below -1", nil},
		{"/set parameter presence_penalty 0.5", "Set parameter 'presence_penalty'", func() bool { return c.sampler.PresencePenalty == 0.5 }},
		{"/set parameter frequency_penalty -0.25", "Set parameter 'frequency_penalty'", func() bool { return c.sampler.FrequencyPenalty == -0.25 }},
		{"/set parameter frequency_penalty Inf", "frequency_penalty +Inf is not a finite number", func() bool { return c.sampler.FrequencyPenalty == -0.25 }},
		{"/set parameter num_predict 0", "num_predict 0: give a positive count, or -1 for no limit", func() bool { return c.maxTokens == -1 }},
		{"/set parameter num_predict 20", "Set parameter", func() bool { return c.maxTokens == 20 }},
		{"/set parameter seed 5", "Set parameter 'seed' to '5'", func() bool { return c.seedSet && c.sampler.Seed == 5 }},
		{"/set parameter seed random", "Set parameter 'seed' to 'random'", func() bool { return !c.seedSet }},
		{"/set parameter seed 7x", `seed: "7x" is not a number`, func() bool { return !c.seedSet }},
		{"/set parameter stop x", "Unknown parameter 'stop'", nil},
		{"/set parameter temperature 0 extra", `/set parameter takes a NAME and a VALUE; "extra" is one word too many`, func() bool { return c.sampler.Temperature == 0.7 }},
		{"/show foo", "Unknown /show command 'foo'.\nAvailable /show commands:", nil},
		{"/show parameters", "temperature        0.7\ntop_k              5\ntop_p              0.95\nmin_p              0.1\nrepeat_penalty     1.1\npresence_penalty   0.5\nfrequency_penalty  -0.25\n", nil},
		// top_p 0 keeps only the top token when the answer is sampled (AsUserGave), and leaves top_k as it was
		{"/set parameter top_p 0", "Set parameter 'top_p' to '0'", func() bool { return c.sampler.TopP == 0 && c.sampler.TopK == 5 }},
		{"/set parameter top_p 0.9", "Set parameter 'top_p' to '0.9'", func() bool { return c.sampler.TopP == 0.9 && c.sampler.TopK == 5 }},
		{"/set hidethinking", "Set 'hidethinking' mode.", func() bool { return c.hideThinking }},
		{"/set nohidethinking", "Set 'nohidethinking' mode.", func() bool { return !c.hideThinking }},
		{"/set verbose", "Set 'verbose' mode.", func() bool { return c.verbose }},
		{"/set think", "Set 'enable_thinking' to true", func() bool { return c.conv.Extra["enable_thinking"] == true }},
		{"/show system", "No system message.", nil},
		{"/set system  Be  brief. ", "Set the system message; the conversation starts over.", func() bool { return c.conv.System == "Be  brief." && len(c.conv.Messages) == 0 }},
		{"/show system", "Be  brief.\n", nil},
		{"/set system", "Removed the system message; the conversation starts over.", func() bool { return c.conv.System == "" }},
		{"/set nonsense", "Unknown /set command 'nonsense'", nil},
		{"/show", "Available /show commands:", nil},
		{"/clear", "Cleared the conversation.", func() bool { return len(c.conv.Messages) == 0 }},
		{"/what", "Unknown command '/what'. Type /? for help", nil},
	}
	for _, tc := range tests {
		c.out.Reset()
		if bye := c.command(tc.line); bye {
			t.Errorf("%s: ended the chat", tc.line)
		}
		if !strings.Contains(c.out.String(), tc.want) {
			t.Errorf("%s: printed %q, want %q", tc.line, c.out, tc.want)
		}
		if tc.check != nil && !tc.check() {
			t.Errorf("%s: state not as it should be", tc.line)
		}
	}
	for _, bye := range []string{"/bye", "/exit"} {
		if !c.command(bye) {
			t.Errorf("%s did not end the chat", bye)
		}
	}
}

// A prompt too long for the context, or an answer that fills it, is
// reported and the chat goes on; /clear makes room again.
func TestChatContextFull(t *testing.T) {
	c := newTestChat(t, goldenModel("tiny-glm-f32"), 40, func(o *runOptions) { o.ignoreEOS = true })
	long := strings.Repeat("many words ", 30)
	c.run(t, &scriptReader{lines: lines(long, "Hi", "Hi again", "/clear", "Hi")}, nil)

	stderr := c.errOut.String()
	for _, want := range []string{
		"the prompt is ", " tokens, and the context holds 40: /clear to start over, or raise --ctx\n",
		"the context of 40 tokens is full: /clear to start over, or raise --ctx\n",
		"the conversation is ",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if n := strings.Count(stderr, "stop: context"); n != 2 {
		t.Errorf("%d answers stopped at a full context, want 2 (before and after /clear):\n%s", n, stderr)
	}
	if len(c.conv.Messages) != 2 || c.conv.Messages[0].Content != "Hi" {
		t.Errorf("conversation %+v", c.conv.Messages)
	}
}

func TestReadMessage(t *testing.T) {
	tests := []struct {
		name    string
		script  []scriptLine
		want    string
		typed   bool // a single typed line: the only input that can be a /command
		err     error
		prompts []string
	}{
		{"a line", lines("hello"), "hello", true, nil, []string{">>> "}},
		{"fenced", lines(`"""first`, "second", `third"""`), "first\nsecond\nthird", false, nil, []string{">>> ", "... ", "... "}},
		{"fence alone", lines(`"""`, "a", "", `"""`), "a\n\n", false, nil, []string{">>> ", "... ", "... ", "... "}},
		{"fenced on one line", lines(`"""one line"""`), "one line", false, nil, []string{">>> "}},
		{"pasted", []scriptLine{{text: "p1", pasted: true}, {text: "p2", pasted: true}, {text: "typed"}}, "p1\np2\ntyped", false, nil, []string{">>> ", "... ", "... "}},
		{"a pasted /command is a message", []scriptLine{{text: "/bye is how to leave", pasted: true}, {text: "and here?"}}, "/bye is how to leave\nand here?", false, nil, nil},
		{"Ctrl-C in a fence", []scriptLine{{text: `"""a`}, {text: "b", err: errInterrupt}}, "a\nb", false, errInterrupt, nil},
		{"end of input", nil, "", false, io.EOF, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &scriptReader{lines: tc.script}
			got, typed, err := readMessage(r)
			if got != tc.want || typed != tc.typed || err != tc.err {
				t.Errorf("read %q (typed %v), %v; want %q (%v), %v", got, typed, err, tc.want, tc.typed, tc.err)
			}
			if tc.prompts != nil && !slices.Equal(r.prompts, tc.prompts) {
				t.Errorf("prompts %q, want %q", r.prompts, tc.prompts)
			}
		})
	}
}

// Ctrl-C clears a typed line; at an empty prompt it warns once, and a
// second one in a row ends the chat.
func TestChatInterruptAtThePrompt(t *testing.T) {
	c := newTestChat(t, goldenModel("tiny-glm-f32"), 0, nil)
	script := []scriptLine{
		{text: "half-typed", err: errInterrupt},
		{err: errInterrupt},
		{text: "/show system"},
		{err: errInterrupt},
		{err: errInterrupt},
		{text: "never read"},
	}
	r := &scriptReader{lines: script}
	c.run(t, r, nil)
	if len(r.lines) != 1 {
		t.Errorf("%d lines left unread, want 1", len(r.lines))
	}
	if n := strings.Count(c.out.String(), "(Ctrl-C again, Ctrl-D or /bye to exit)"); n != 2 {
		t.Errorf("%d exit hints, want 2:\n%s", n, c.out)
	}
}
