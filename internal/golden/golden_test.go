package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTokenizations(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	got, err := ReadTokenizations(write("ok.jsonl", `{"text":"a b","ids":[1,2]}`+"\n"+`{"text":"","ids":[]}`+"\n"))
	if err != nil || len(got) != 2 || got[0].Text != "a b" || len(got[0].IDs) != 2 || got[0].IDs[1] != 2 || got[1].IDs == nil {
		t.Errorf("ReadTokenizations = %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad.jsonl", `{"text":"a","ids":[1]}` + "\n" + `{"text":`, "bad.jsonl:2: "},
		{"empty.jsonl", "", "no tokenizations"},
	} {
		if _, err := ReadTokenizations(write(tc.name, tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadTokenizations(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Error("a missing file gave no error")
	}
}

func TestReadTemplateCases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	got, err := ReadTemplateCases(write("ok.json", `[{"template":"T","case":"c","input":{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function"}],"add_generation_prompt":true},"bos_token":"<s>","eos_token":"</s>","output":"out"},
		{"template":"T","case":"d","input":{"messages":[]},"output":""}]`))
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadTemplateCases = %+v, %v", got, err)
	}
	c := got[0]
	if c.Template != "T" || c.Case != "c" || string(c.Input.Messages) != `[{"role":"user","content":"hi"}]` || string(c.Input.Tools) != `[{"type":"function"}]` ||
		!c.Input.AddGenerationPrompt || c.BOSToken != "<s>" || c.EOSToken != "</s>" || c.Output != "out" {
		t.Errorf("case 0 = %+v", c)
	}
	if got[1].Input.Tools != nil || got[1].Input.AddGenerationPrompt {
		t.Errorf("case 1 = %+v: no tools and no generation prompt", got[1])
	}
	for _, tc := range []struct{ name, text, want string }{
		{"bad.json", `[{"template":`, "bad.json: "},
		{"empty.json", "[]", "no template cases"},
	} {
		if _, err := ReadTemplateCases(write(tc.name, tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadTemplateCases(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file gave no error")
	}
}

// writeFile writes text to dir/name and returns the path; a failure ends the test.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
