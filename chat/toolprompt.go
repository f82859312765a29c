package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Tools in the system prompt. DeepSeek-V3.1's chat template writes tool calls but never the tools a request
// offers: its model card has the caller describe them in the system prompt, in the text ToolsPrompt writes
// (ollama's DeepSeek templates write the same). A server offering tools to such a template puts it there.

// ToolsPrompt is the system prompt text that shows tools to a model whose template writes calls in syn's
// syntax but not the tools themselves; "" for a syntax whose templates show them (or no tools).
func (syn *ToolSyntax) ToolsPrompt(tools []json.RawMessage) string {
	if syn != deepseekTools || len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Tools\nYou have access to the following tools:\n")
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Function.Name == "" {
			continue
		}
		params := []byte("{}")
		var c bytes.Buffer
		if len(t.Function.Parameters) > 0 && json.Compact(&c, t.Function.Parameters) == nil {
			params = c.Bytes()
		}
		b.WriteString("\n### " + t.Function.Name + "\nDescription: " + t.Function.Description + "\n\nParameters: " + string(params) + "\n")
	}
	b.WriteString("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n")
	b.WriteString(dsCallsBegin + dsCallBegin + "tool_call_name" + dsSep + "tool_call_arguments" + dsCallEnd + "{{additional_tool_calls}}" + dsCallsEnd + "\n\n")
	b.WriteString("Where:\n\n")
	b.WriteString("- `tool_call_name` must be an exact match to one of the available tools\n")
	b.WriteString("- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n")
	b.WriteString("- For multiple tool calls, chain them directly without separators or spaces\n")
	return b.String()
}

// WithSystem returns msgs with text at the end of their system message, or in a new one first when they
// have none; msgs itself is left as it was.
func WithSystem(msgs []Message, text string) []Message {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		out := slices.Clone(msgs)
		if out[0].Content != "" {
			out[0].Content += "\n\n"
		}
		out[0].Content += text
		return out
	}
	return append([]Message{{Role: "system", Content: text}}, msgs...)
}
