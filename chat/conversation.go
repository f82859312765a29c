package chat

import (
	"strings"

	"github.com/latent-ai/latent/tokenizer"
)

// PromptTokens tokenizes a rendered prompt as the model's input: special
// tokens parsed (the template wrote them as text), and BOS first when the
// model wants one and the text does not already begin with it (templates
// that write bos_token themselves would otherwise get two).
func PromptTokens(tok *tokenizer.Tokenizer, text string) []int32 {
	ids := tok.Encode(text, true)
	if tok.AddBOS() && (len(ids) == 0 || ids[0] != tok.BOS()) {
		ids = append([]int32{tok.BOS()}, ids...)
	}
	return ids
}

// Conversation is a chat: its messages and how they become the model's
// prompt each turn. Every turn renders the whole history again, so a model
// session keeps the previous turns in its cache (engine.Session).
type Conversation struct {
	Template  *Template
	Tokenizer *tokenizer.Tokenizer
	// System, when not empty, is the system message that opens the chat.
	System   string
	Messages []Message // the turns, without the system message
	// Extra holds template variables such as enable_thinking.
	Extra map[string]any
}

// Prompt renders the conversation, ending with the opening of the
// assistant's turn, and returns the text and its tokens.
func (c *Conversation) Prompt() (text string, ids []int32, err error) {
	msgs := c.Messages
	if c.System != "" {
		msgs = append([]Message{{Role: "system", Content: c.System}}, msgs...)
	}
	text, err = c.Template.Render(Input{Messages: msgs, AddGenerationPrompt: true, Extra: c.Extra})
	if err != nil {
		return "", nil, err
	}
	return text, PromptTokens(c.Tokenizer, text), nil
}

// Add appends a message.
func (c *Conversation) Add(role, content string) {
	c.Messages = append(c.Messages, Message{Role: role, Content: content})
}

// Clear forgets the messages (the system message stays).
func (c *Conversation) Clear() { c.Messages = nil }

// Reply turns generated tokens into text as they stream: whole UTF-8
// characters only, separated into reasoning (<think>…</think>) and answer.
type Reply struct {
	dec                *tokenizer.Decoder
	split              *ReasoningSplitter
	reasoning, content strings.Builder
}

// NewReply starts the reply to prompt (whose end may open the reasoning).
func NewReply(tok *tokenizer.Tokenizer, prompt string) *Reply {
	return &Reply{dec: tok.NewDecoder(), split: NewReasoningSplitter(prompt)}
}

// Add takes the next generated token and returns the reasoning and answer
// text it completes (either or both may be empty).
func (r *Reply) Add(id int32) (reasoning, answer string) {
	return r.keep(r.split.Add(r.dec.Add(id)))
}

// Flush ends the reply and returns the text still held back.
func (r *Reply) Flush() (reasoning, answer string) {
	r1, a1 := r.split.Add(r.dec.Flush())
	r2, a2 := r.split.Flush()
	return r.keep(r1+r2, a1+a2)
}

func (r *Reply) keep(reasoning, answer string) (string, string) {
	r.reasoning.WriteString(reasoning)
	r.content.WriteString(answer)
	return reasoning, answer
}

// Thinking reports whether the reply is inside its reasoning.
func (r *Reply) Thinking() bool { return r.split.Thinking() }

// Message is the reply so far as an assistant message.
func (r *Reply) Message() Message {
	return Message{Role: "assistant", Content: r.content.String(), ReasoningContent: r.reasoning.String()}
}
