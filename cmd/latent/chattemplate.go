package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/chat"
)

func newChatTemplateCmd() *cobra.Command {
	var (
		messagesFile, toolsFile string
		noGenPrompt             bool
		bos, eos                string
		vars                    []string
	)
	cmd := &cobra.Command{
		Use:   "chat-template TEMPLATE --messages FILE",
		Short: "Render a chat template (a model's, or a .jinja file) for a conversation and print the prompt",
		Long: `Render a chat template and print the prompt exactly, with nothing added.

TEMPLATE is a GGUF model, as a file or a model in the store (its tokenizer.chat_template, or the ChatML default when it has none, and its
BOS and EOS token strings) or a .jinja file. --messages is a JSON array of OpenAI-style messages
({"role": ..., "content": ..., "reasoning_content", "tool_calls", "tool_call_id", "name"}); --tools a JSON
array of tool definitions. A FILE of "-" is standard input.`,
		Example: `  latent chat-template model.gguf --messages chat.json
  echo '[{"role":"user","content":"Hi"}]' | latent chat-template glm.jinja --messages - --var enable_thinking=false`,
		Args: oneArg("template"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tpl, err := loadChatTemplate(cmd, args[0])
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("bos-token") {
				tpl.BOSToken = bos
			}
			if cmd.Flags().Changed("eos-token") {
				tpl.EOSToken = eos
			}
			in := chat.Input{AddGenerationPrompt: !noGenPrompt}
			if err := readJSONFile(cmd, messagesFile, "messages", &in.Messages); err != nil {
				return err
			}
			if toolsFile != "" {
				if err := readJSONFile(cmd, toolsFile, "tools", &in.Tools); err != nil {
					return err
				}
			}
			for _, kv := range vars {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return fmt.Errorf("--var %q: want NAME=JSON", kv)
				}
				if !json.Valid([]byte(value)) {
					return fmt.Errorf("--var %s: %q is not JSON (quote strings: %s='\"text\"')", name, value, name)
				}
				if in.Extra == nil {
					in.Extra = map[string]any{}
				}
				in.Extra[name] = json.RawMessage(value)
			}
			out, err := tpl.Render(in)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&messagesFile, "messages", "", "JSON file with the conversation's messages (- for stdin)")
	fl.StringVar(&toolsFile, "tools", "", "JSON file with the tool definitions")
	fl.BoolVar(&noGenPrompt, "no-generation-prompt", false, "do not end with the opening of an assistant turn")
	fl.StringVar(&bos, "bos-token", "", "bos_token text (default: the model's)")
	fl.StringVar(&eos, "eos-token", "", "eos_token text (default: the model's)")
	fl.StringArrayVar(&vars, "var", nil, "extra template variable NAME=JSON, e.g. enable_thinking=false (repeatable)")
	cmd.MarkFlagRequired("messages")
	return cmd
}

// loadChatTemplate reads a .jinja file as template text, anything else as a
// GGUF model (a path or a stored model).
func loadChatTemplate(cmd *cobra.Command, path string) (*chat.Template, error) {
	if strings.HasSuffix(strings.ToLower(path), ".jinja") {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		tpl, err := chat.Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return tpl, nil
	}
	f, err := openStored(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tpl, err := chat.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if tpl.Default {
		fmt.Fprintf(cmd.ErrOrStderr(), "latent: %s has no chat template; using the ChatML default\n", path)
	}
	return tpl, nil
}

// readJSONFile decodes a JSON file ("-": stdin) into v, naming the file and the flag in errors.
func readJSONFile(cmd *cobra.Command, path, what string, v any) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
		path = "standard input"
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("--%s: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) { // its message names Go types, not what the file should hold
			at := "an element of the array"
			switch {
			case typeErr.Field != "":
				at = fmt.Sprintf("%q", typeErr.Field)
			case typeErr.Type.Kind() == reflect.Slice:
				at = "the file"
			}
			return fmt.Errorf("--%s %s: %s is a JSON %s, want a JSON %s", what, path, at, typeErr.Value, jsonKind(typeErr.Type.Kind()))
		}
		return fmt.Errorf("--%s %s: %w", what, path, err)
	}
	return nil
}

// jsonKind names the JSON type that decodes into a Go kind.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "number"
}
