package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/latent-ai/latent/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var (
		text       string
		detokenize bool
		noSpecial  bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize MODEL [--text TEXT] [--detokenize] [--no-special]",
		Short: "Print the token ids of a text as a JSON array, or with --detokenize the text of token ids",
		Long: `Print the token ids of a text as a JSON array, as the model's tokenizer
(llama.cpp's, for the same file) splits it: no BOS is added, and the texts of
special tokens ("<|user|>") become those tokens unless --no-special is given.

With --detokenize, the input is token ids, as a JSON array ("[1,2,3]") or
separated by commas ("1,2,3"), and the output is their text, exactly, with no
newline added; special tokens are rendered as their text.

The input is --text, or standard input when --text is not given. MODEL is a
.gguf file or a model in the store (latent list); nothing is downloaded.`,
		Args: oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := text
			if !cmd.Flags().Changed("text") {
				var err error
				if in, err = readInput(cmd); err != nil {
					return err
				}
			}
			tok, err := loadTokenizer(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if detokenize {
				ids, err := parseIDList(in, tok.Vocab())
				if err != nil {
					return err
				}
				_, err = io.WriteString(out, tok.Decode(ids))
				return err
			}
			ids := tok.Encode(in, !noSpecial)
			if ids == nil {
				ids = []int32{}
			}
			js, err := json.Marshal(ids)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", js)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&text, "text", "", "the text (or with --detokenize the ids) to convert; default: standard input")
	f.BoolVar(&detokenize, "detokenize", false, "convert token ids (a JSON array or comma-separated) to text")
	f.BoolVar(&noSpecial, "no-special", false, "tokenize the texts of special tokens as plain text")
	return cmd
}

// loadTokenizer reads the tokenizer of a model file or stored model.
func loadTokenizer(ref string) (*tokenizer.Tokenizer, error) {
	f, err := openStored(ref)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tokenizer.FromGGUF(f)
}

// readInput reads standard input, refusing to wait on a terminal.
func readInput(cmd *cobra.Command) (string, error) {
	r := cmd.InOrStdin()
	if f, ok := r.(*os.File); ok {
		if term.IsTerminal(int(f.Fd())) {
			return "", errors.New("give the input with --text or on standard input")
		}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("read standard input: %w", err)
	}
	return string(b), nil
}

// parseIDList reads token ids as a JSON array or a comma-separated list and
// checks them against the vocabulary.
func parseIDList(s string, vocab int) ([]int32, error) {
	const flag = "--detokenize"
	s = strings.TrimSpace(s)
	var ids []int32
	if strings.HasPrefix(s, "[") {
		var raw []*int64 // a null is not an id (it would read as 0)
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			return nil, fmt.Errorf("%s: the input is not a JSON array of token ids: %v", flag, err)
		}
		for i, p := range raw {
			if p == nil {
				return nil, fmt.Errorf("%s: element %d of the array is null, not a token id", flag, i)
			}
			v := *p
			if v < 0 || v >= int64(vocab) {
				return nil, fmt.Errorf("%s: token id %d is outside the vocabulary of %d tokens", flag, v, vocab)
			}
			ids = append(ids, int32(v))
		}
		return ids, nil
	}
	ids, err := parseTokens(flag, s, false)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if int(id) >= vocab {
			return nil, fmt.Errorf("%s: token id %d is outside the vocabulary of %d tokens", flag, id, vocab)
		}
	}
	return ids, nil
}
