package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"strings"

	"github.com/latent-ai/latent/chat"
	"github.com/latent-ai/latent/constrain"
	"github.com/latent-ai/latent/engine"
)

// stopList is a stop field: one string, a list of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	case len(b) > 0 && b[0] == '[':
		var many []string
		if err := json.Unmarshal(b, &many); err != nil {
			return &fieldError{"stop", "must be a string or an array of strings"}
		}
		*s = many
		return nil
	}
	return &fieldError{"stop", "must be a string or an array of strings"}
}

// Stop strings are bounded because matching a stop of n bytes that the
// output keeps almost completing costs O(n²) per token.
const (
	maxStops   = 16
	maxStopLen = 1024
)

func (s stopList) check() error {
	if len(s) > maxStops {
		return badRequest("stop", fmt.Sprintf("stop has %d strings; at most %d are allowed", len(s), maxStops))
	}
	for i, x := range s {
		if len(x) > maxStopLen {
			return badRequest("stop", fmt.Sprintf("stop[%d] is %d bytes long; at most %d are allowed", i, len(x), maxStopLen))
		}
	}
	return nil
}

// sampling is the sampling fields both APIs share, nil where not given.
type sampling struct {
	Temperature                       *float64
	TopP                              *float64
	TopK                              *int
	MinP                              *float64
	RepeatPenalty                     *float64
	PresencePenalty, FrequencyPenalty *float64
	RepeatLastN                       *int
	Seed                              *int64
	penaltyRange                      float64 // presence and frequency penalties lie in ±penaltyRange (OpenAI's 2); 0: any number
}

// options turns the fields into sampler options: llama.cpp's defaults for
// what was not given, and a fresh random seed unless one was. Errors name
// the fields under prefix ("options." for Ollama's); maxTemperature 0 leaves
// the temperature unbounded.
func (s sampling) options(prefix string, maxTemperature float64) (engine.SamplerOptions, error) {
	o := engine.DefaultSamplerOptions()
	bad := func(field, format string, args ...any) error {
		return badRequest(prefix+field, prefix+field+" "+fmt.Sprintf(format, args...))
	}
	// JSON numbers are finite; the sampler works in float32
	for _, f := range []struct {
		field string
		v     *float64
	}{{"temperature", s.Temperature}, {"top_p", s.TopP}, {"min_p", s.MinP}, {"repeat_penalty", s.RepeatPenalty},
		{"presence_penalty", s.PresencePenalty}, {"frequency_penalty", s.FrequencyPenalty}} {
		if f.v != nil && math.Abs(*f.v) > math.MaxFloat32 {
			return o, bad(f.field, "%v is too large", *f.v)
		}
	}
	if t := s.Temperature; t != nil {
		switch {
		case maxTemperature > 0 && (*t < 0 || *t > maxTemperature):
			return o, bad("temperature", "%v is outside [0, %v]", *t, maxTemperature)
		case *t < 0:
			return o, bad("temperature", "%v is not a number from 0 up", *t)
		}
		o.Temperature = float32(*t)
	}
	if p := s.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return o, bad("top_p", "%v is outside [0, 1]", *p)
		}
		o.TopP = float32(*p)
	}
	if k := s.TopK; k != nil {
		if *k < 0 {
			return o, bad("top_k", "%d is negative (0 turns it off)", *k)
		}
		o.TopK = *k
	}
	if p := s.MinP; p != nil {
		if *p < 0 || *p > 1 {
			return o, bad("min_p", "%v is outside [0, 1]", *p)
		}
		o.MinP = float32(*p)
	}
	if p := s.RepeatPenalty; p != nil {
		if *p < 0 {
			return o, bad("repeat_penalty", "%v is not a number from 0 up (1 turns it off)", *p)
		}
		o.RepeatPenalty = float32(*p)
	}
	for _, p := range []struct {
		field string
		v     *float64
		dst   *float32
	}{{"presence_penalty", s.PresencePenalty, &o.PresencePenalty}, {"frequency_penalty", s.FrequencyPenalty, &o.FrequencyPenalty}} {
		if p.v == nil {
			continue
		}
		if r := s.penaltyRange; r > 0 && math.Abs(*p.v) > r {
			return o, bad(p.field, "%v is outside [-%v, %v]", *p.v, r, r)
		}
		*p.dst = float32(*p.v)
	}
	if n := s.RepeatLastN; n != nil {
		if *n < -1 {
			return o, bad("repeat_last_n", "%d is below -1 (-1: the whole history)", *n)
		}
		o.RepeatLastN = *n
	}
	if s.Seed != nil {
		o.Seed = uint64(*s.Seed)
	} else {
		o.Seed = mrand.Uint64()
	}
	return o, nil
}

// maxTokensOf checks a token limit: a positive count, or -1 (or absent) for
// none.
func maxTokensOf(param string, n *int) (int, error) {
	if n == nil || *n == -1 {
		return 0, nil
	}
	if *n < 1 {
		return 0, badRequest(param, fmt.Sprintf("%s %d must be at least 1 (or -1 for no limit)", param, *n))
	}
	return *n, nil
}

// roles are the message roles templates know; OpenAI's "developer" is the
// system prompt of newer models.
var roles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

func checkRole(i int, role string) (string, error) {
	r, ok := roles[role]
	if !ok {
		param := fmt.Sprintf("messages[%d].role", i)
		if role == "" {
			return "", badRequest(param, fmt.Sprintf("%s is missing (one of system, developer, user, assistant, tool)", param))
		}
		return "", badRequest(param, fmt.Sprintf("%s %q is not one of system, developer, user, assistant, tool", param, role))
	}
	return r, nil
}

// noThinking turns a thinking template's reasoning off for an answer that
// must be JSON from its first token, refusing a request that asked for it
// (param names where).
func (s *Server) noThinking(extra map[string]any, param string) (map[string]any, error) {
	for _, k := range thinkingKeys {
		if extra[k] == true {
			return nil, badRequest(param, "thinking with a JSON answer is not supported: the answer is JSON from its first token")
		}
	}
	if !s.thinks {
		return extra, nil
	}
	return thinkingOff(extra), nil
}

// thinkingKeys are the template options (chat_template_kwargs) that switch
// reasoning on: enable_thinking (GLM-4.7, Qwen3), thinking (DeepSeek-V3.1).
var thinkingKeys = []string{"enable_thinking", "thinking"}

// thinkingOff is a copy of a template's options with reasoning off under
// each name (a template reads its own and ignores the other); the caller's
// map is left as it was.
func thinkingOff(extra map[string]any) map[string]any {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range thinkingKeys {
		out[k] = false
	}
	return out
}

// jsonAnswer asks for an answer that is one JSON object, that schema allows
// when set.
type jsonAnswer struct {
	schema *constrain.Schema
}

// readAnswer sets how gen's answer is read: as one JSON object when j
// asks for it (then not for tool calls: a call's markup would be inside a
// string), else for calls to the offered tools, in the syntax the model's
// template writes. A prompt that leaves the answer inside a reasoning block
// cannot take a JSON answer, which must come first.
func (s *Server) readAnswer(gen *genRequest, tools []json.RawMessage, j *jsonAnswer, param string) error {
	switch {
	case j != nil && gen.opensReasoning():
		return badRequest(param, "the chat template opens a reasoning block for this request, and a JSON answer must come first (turn thinking off)")
	case j != nil:
		gen.constraint = constrain.NewJSONTokens(s.vocab(), j.schema)
	case len(tools) > 0:
		gen.tools = tools
	}
	return nil
}

// takesTools reports whether the model can be shown tools: its template
// shows them, or writes calls and leaves the tools to the system prompt.
func (s *Server) takesTools() bool { return s.showsTools || s.toolSyntax.DescribesTools() }

// chatInput checks the tools a chat offers (tools[i]'s shape) and puts
// them where the model's template takes them: in the template's own tools
// when it shows them; described in the system prompt when it writes calls
// but leaves the tools to the caller (DeepSeek-V3.1's, as its model card
// says and ollama does); refused, in ollama's words, when it cannot show
// them at all. Done once a request, before render (which fitChat may call
// several times).
func (s *Server) chatInput(msgs []chat.Message, tools []json.RawMessage, extra map[string]any) ([]chat.Message, map[string]any, error) {
	if len(msgs) == 0 {
		return nil, nil, errNoMessages
	}
	for i, raw := range tools {
		if _, err := chat.ParseToolDef(raw); err != nil {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d]", i), fmt.Sprintf("tools[%d] %s", i, err))
		}
	}
	if len(tools) == 0 || s.showsTools {
		return msgs, extra, nil
	}
	if !s.takesTools() {
		return nil, nil, badRequest("tools", fmt.Sprintf("%q does not support tools: its chat template does not show them to the model", s.model.Name))
	}
	// Its model card has calls only without thinking (ollama's template
	// drops the reasoning when tools are offered too).
	return chat.WithSystem(msgs, s.toolSyntax.ToolsPrompt(tools)), thinkingOff(extra), nil
}

var errNoMessages = badRequest("messages", "messages is empty: send at least one message")

// render applies the model's chat template to a chat and the tools it
// offers, as chatInput left them.
func (s *Server) render(msgs []chat.Message, tools []json.RawMessage, extra map[string]any) (string, error) {
	text, err := s.model.Template.Render(chat.Input{Messages: msgs, Tools: tools, AddGenerationPrompt: true, Extra: extra})
	if err != nil {
		// Templates refuse conversations they cannot express (raise_exception).
		return "", badRequest("messages", "the model's chat template rejected the conversation: "+err.Error())
	}
	return text, nil
}

// toolArguments turns OpenAI's JSON-encoded argument string into the JSON
// value templates iterate over; other values pass as they are.
func toolArguments(raw json.RawMessage) json.RawMessage {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return raw
}

// textContent reads a message's content: a string, null, or (OpenAI) a list
// of parts, of which only text parts are supported.
func textContent(i int, raw json.RawMessage) (string, error) {
	param := fmt.Sprintf("messages[%d].content", i)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badRequest(param, fmt.Sprintf("%s is not a valid string", param))
		}
		return s, nil
	case '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", badRequest(param, fmt.Sprintf("%s must be a string or an array of content parts", param))
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "text" {
				return "", badRequest(param, fmt.Sprintf("%s[%d] is a %q part: only text is supported", param, j, p.Type))
			}
			if p.Text == nil {
				return "", badRequest(param, fmt.Sprintf("%s[%d] has no text", param, j))
			}
			b.WriteString(*p.Text)
		}
		return b.String(), nil
	}
	return "", badRequest(param, fmt.Sprintf("%s must be a string or an array of content parts, not %s", param, jsonValueKind(raw)))
}

func jsonValueKind(raw []byte) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '{':
		return "an object"
	case raw[0] == 't' || raw[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

func newID(prefix string) string {
	return prefix + strings.ToLower(rand.Text())
}
