package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execLatent runs the CLI in-process with the given standard streams (a nil
// stdin is the process's).
func execLatent(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) error {
	root := newRootCmd()
	if stdin != nil {
		root.SetIn(stdin)
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// writeFile writes data to dir/name and returns the path; a failure ends the test.
func writeFile[D ~string | ~[]byte](t *testing.T, dir, name string, data D) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkError reports, naming what failed, unless err is a one-line error
// containing want (the CLI's promise for bad input).
func checkError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: error %v, want one line containing %q", what, err, want)
	}
}

// runLatent runs the CLI in-process and returns what it printed (standard
// output and error together) and its error.
func runLatent(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := execLatent(context.Background(), nil, &out, &out, args...)
	return out.String(), err
}

// runLatentIn is runLatent with stdin as standard input.
func runLatentIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := execLatent(context.Background(), strings.NewReader(stdin), &out, &out, args...)
	return out.String(), err
}

// A missing or extra argument is named, with the command's usage line
// (each command's own error tests hold the other commands' cases).
func TestArgumentCounts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "a", "b"}, "latent show takes one model, not 2 (a b): latent show MODEL"},
		{[]string{"bench"}, "give a model: latent bench MODEL [-p 512]"},
		{[]string{"logits"}, "give a model: latent logits MODEL --tokens"},
		{[]string{"profile", "x", "y", "z"}, "latent profile takes one model, not 3 (x y z)"},
		{[]string{"rm"}, "give a model: latent rm MODEL..."},
		{[]string{"run"}, "give a model: latent run MODEL [PROMPT...]"},
	} {
		_, err := runLatent(t, tc.args...)
		checkError(t, strings.Join(tc.args, " "), err, tc.want)
	}
}
