package chat

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latent-ai/latent/gguf"
	"github.com/latent-ai/latent/tokenizer"
)

// goldenTokenizer is the tokenizer of the golden tiny GLM model: byte-level
// BPE with [gMASK] as BOS (add_bos_token true) and GLM's special tokens.
func goldenTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join("..", "..", "shared", "golden", "models", "tiny-glm-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.AddBOS() {
		t.Fatal("the golden GLM tokenizer no longer adds BOS")
	}
	return tok
}

func glmTemplate(t *testing.T) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "shared", "golden", "templates", "GLM-4.7-Flash.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestPromptTokens(t *testing.T) {
	tok := goldenTokenizer(t)
	bos := tok.BOS()
	body := tok.Encode("<|user|>hi", true)
	if len(body) < 2 || body[0] != 1020 { // <|user|> is parsed as its token
		t.Fatalf("<|user|>hi encodes to %v", body)
	}
	for _, tc := range []struct {
		text string
		want []int32
	}{
		{"<|user|>hi", append([]int32{bos}, body...)},
		// A template that writes the BOS text itself does not get two.
		{"[gMASK]<|user|>hi", append([]int32{bos}, body...)},
		{"", []int32{bos}},
	} {
		if got := PromptTokens(tok, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestConversationPrompt(t *testing.T) {
	tok := goldenTokenizer(t)
	tmpl := glmTemplate(t)
	c := Conversation{Template: tmpl, Tokenizer: tok, System: "Be brief."}
	c.Add("user", "Hello")
	c.Messages = append(c.Messages, Message{Role: "assistant", Content: "Hi.", ReasoningContent: "A greeting."})
	c.Add("user", "Again")
	for _, tc := range []struct {
		extra map[string]any
		want  string
	}{
		// Thinking on (the template's default): the generation prompt opens
		// the reasoning; the earlier turn's reasoning is not repeated.
		{nil, "[gMASK]<sop><|system|>Be brief.<|user|>Hello<|assistant|></think>Hi.<|user|>Again<|assistant|><think>"},
		{map[string]any{"enable_thinking": false}, "[gMASK]<sop><|system|>Be brief.<|user|>Hello<|assistant|></think>Hi.<|user|>Again<|assistant|></think>"},
	} {
		c.Extra = tc.extra
		text, ids, err := c.Prompt()
		if err != nil {
			t.Fatal(err)
		}
		if text != tc.want {
			t.Errorf("rendered\n%q\nwant\n%q", text, tc.want)
		}
		if want := PromptTokens(tok, tc.want); !slices.Equal(ids, want) {
			t.Errorf("tokens %v, want %v", ids, want)
		}
	}

	c.Clear()
	c.Extra = nil
	c.Add("user", "New")
	if text, _, _ := c.Prompt(); text != "[gMASK]<sop><|system|>Be brief.<|user|>New<|assistant|><think>" {
		t.Errorf("after Clear: %q", text)
	}
	c.Template, _ = Parse("{{ raise_exception('no') }}")
	if _, _, err := c.Prompt(); err == nil || !strings.Contains(err.Error(), "no") {
		t.Errorf("failing template: %v", err)
	}
}

func TestReply(t *testing.T) {
	tok := goldenTokenizer(t)
	const reasoning, answer = "Let me see: 日本.", "Answer ✓ here."
	ids := tok.Encode(reasoning+"</think>\n\n"+answer, true)
	// 日 is three bytes; the tiny vocabulary spells it with more than one token.
	if n := len(tok.Encode("日", true)); n < 2 {
		t.Fatalf("日 is %d token: the test needs a character split across tokens", n)
	}
	r := NewReply(tok, "<|assistant|><think>")
	var gotR, gotA strings.Builder
	for _, id := range ids {
		if !r.Thinking() && gotA.Len() == 0 && gotR.Len() == 0 {
			t.Fatal("a reply to a prompt ending in <think> starts outside the reasoning")
		}
		pr, pa := r.Add(id)
		if !utf8.ValidString(pr) || !utf8.ValidString(pa) {
			t.Errorf("pieces %q, %q are not valid UTF-8", pr, pa)
		}
		gotR.WriteString(pr)
		gotA.WriteString(pa)
	}
	pr, pa := r.Flush()
	gotR.WriteString(pr)
	gotA.WriteString(pa)
	if gotR.String() != reasoning || gotA.String() != answer {
		t.Errorf("streamed reasoning %q, answer %q; want %q, %q", gotR.String(), gotA.String(), reasoning, answer)
	}
	if m := r.Message(); m.Role != "assistant" || m.Content != answer || m.ReasoningContent != reasoning || m.ToolCalls != nil {
		t.Errorf("message %+v", m)
	}

	// Without an open block the reply is all answer, character by character.
	r = NewReply(tok, "<|assistant|></think>")
	var all strings.Builder
	for _, id := range tok.Encode("日本", true) {
		_, a := r.Add(id)
		if a != "" && a != "日" && a != "本" && a != "日本" {
			t.Errorf("piece %q splits a character", a)
		}
		all.WriteString(a)
	}
	_, a := r.Flush()
	if all.String()+a != "日本" || r.Thinking() {
		t.Errorf("answer %q", all.String()+a)
	}
}
