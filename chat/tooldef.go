package chat

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ToolDef is a tool definition as the OpenAI and Ollama APIs both send it:
// {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}.
type ToolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"` // a JSON schema, as sent
	} `json:"function"`
}

// ParseToolDef reads a tool definition. Its error says what is wrong with
// the shape (templates read these fields, and would otherwise fail with an
// error about the conversation); the fields it could read come with it.
func ParseToolDef(raw json.RawMessage) (ToolDef, error) {
	var t ToolDef
	if err := json.Unmarshal(raw, &t); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return t, errors.New(`must be an object {"type": "function", "function": {"name": ...}}`)
	}
	switch {
	case t.Type != "function":
		return t, errors.New(`type must be "function"`)
	case t.Function.Name == "":
		return t, errors.New("function.name is missing")
	}
	return t, nil
}
