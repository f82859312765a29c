package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Tools in the system prompt. DeepSeek-V3.1's chat template writes tool calls but never the tools a request
// offers: its model card has the caller describe them after the system prompt, in the text ToolsPrompt
// writes (as ollama's DeepSeek renderer does; the parameters as compact JSON, in the request's key order).
// A server offering tools to such a template puts it there.

// ToolsPrompt is the text that shows tools to a model whose template writes calls in syn's syntax but not
// the tools themselves, to go at the end of the system prompt (it starts with the blank line that follows
// one); "" for a syntax whose templates show the tools, or none that leaves them to the caller.
func (syn *ToolSyntax) ToolsPrompt(tools []json.RawMessage) string {
	if !syn.DescribesTools() || len(tools) == 0 {
		return ""
	}
	return syn.toolsPrompt(tools)
}

// deepseekToolsPrompt is DeepSeek-V3.1's ToolsPrompt.
func deepseekToolsPrompt(tools []json.RawMessage) string {
	var b strings.Builder
	b.WriteString("\n\n## Tools\nYou have access to the following tools:\n")
	for _, raw := range tools {
		t, err := ParseToolDef(raw)
		if err != nil {
			continue // the server refused it already; nothing to show
		}
		params := []byte("{}")
		var c bytes.Buffer
		if p := t.Function.Parameters; len(p) > 0 && string(p) != "null" && json.Compact(&c, p) == nil {
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

// DescribesTools reports whether syn's templates leave the tools to the system prompt, where ToolsPrompt
// describes them (false for nil: no syntax).
func (syn *ToolSyntax) DescribesTools() bool { return syn != nil && syn.toolsPrompt != nil }

// WithSystem returns msgs with text appended to their last system message (templates join several, or keep
// only the last), or in a new one first when they have none; msgs itself is left as it was.
func WithSystem(msgs []Message, text string) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "system" {
			out := slices.Clone(msgs)
			out[i].Content += text
			return out
		}
	}
	return append([]Message{{Role: "system", Content: text}}, msgs...)
}

// CallPrefix is how an answer in syn's syntax begins a call (of the function name, when not ""): the text a
// request that requires a call makes the answer write first, and the bytes one of which must follow it when
// the name would otherwise be open to a longer one (GLM's markup goes on with "<" or a newline). The syntaxes
// whose markup puts the name later (Hermes' JSON object) name it too, in the form their templates write.
func (syn *ToolSyntax) CallPrefix(name string) (prefix, next string) {
	switch {
	case syn == nil:
		return "", ""
	case name != "":
		return syn.named(name)
	case syn.end != "": // calls inside their own brackets: the first call's markup too
		return syn.Begin + syn.open, ""
	}
	return syn.Begin, ""
}

// CallEnd is the markup after which an answer's calls in syn's syntax read as calls: the calls' closing
// bracket where the syntax has one (DeepSeek's: text after a call's own end reads only past it), else one
// call's. A required call's answer may end only after it.
func (syn *ToolSyntax) CallEnd() string {
	if syn.end != "" {
		return syn.end
	}
	return syn.close
}
