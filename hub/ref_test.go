package hub

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
	}{
		{"hf.co/bartowski/zai-org_GLM-4.7-Flash-GGUF", Ref{Owner: "bartowski", Repo: "zai-org_GLM-4.7-Flash-GGUF"}},
		{"hf.co/bartowski/zai-org_GLM-4.7-Flash-GGUF:Q8_0", Ref{Owner: "bartowski", Repo: "zai-org_GLM-4.7-Flash-GGUF", Quant: "Q8_0"}},
		{"huggingface.co/tencent/Youtu-LLM-2B-GGUF:q8_0", Ref{Owner: "tencent", Repo: "Youtu-LLM-2B-GGUF", Quant: "q8_0"}},
		{"https://huggingface.co/tencent/Youtu-LLM-2B-GGUF", Ref{Owner: "tencent", Repo: "Youtu-LLM-2B-GGUF"}},
		{"HF.CO/a/b:latest", Ref{Owner: "a", Repo: "b"}},
		{"owner/repo:Q4_K_M", Ref{Owner: "owner", Repo: "repo", Quant: "Q4_K_M"}},
		{"owner/repo", Ref{Owner: "owner", Repo: "repo"}},
		{"hf.co/o/r/sub/model-Q4_0.gguf", Ref{Owner: "o", Repo: "r", File: "sub/model-Q4_0.gguf"}},
		{"https://huggingface.co/o/r/blob/main/model-Q4_0.gguf", Ref{Owner: "o", Repo: "r", File: "model-Q4_0.gguf"}},
		{"glm-4.7-flash", Ref{Owner: "bartowski", Repo: "zai-org_GLM-4.7-Flash-GGUF", Alias: "glm-4.7-flash"}},
		{"DeepSeek-V2-Lite:Q8_0", Ref{Owner: "mradermacher", Repo: "DeepSeek-V2-Lite-Chat-GGUF", Quant: "Q8_0", Alias: "deepseek-v2-lite"}},
		{"youtu-llm-2b", Ref{Owner: "tencent", Repo: "Youtu-LLM-2B-GGUF", Alias: "youtu-llm-2b"}},
	}
	for _, tc := range tests {
		got, err := ParseRef(tc.in)
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}

	bad := []struct{ in, want string }{
		{"llama3", "not a known model name"},
		{"hf.co/onlyowner", "no repository"},
		{"hf.co/o/r:", "empty quantization tag"},
		{"hf.co/o/r:Q4 K", "has characters"},
		{"hf.co/../r", "not a valid"},
		{"hf.co/o/r/../../etc/passwd.gguf", "must name a .gguf file"},
		{"hf.co/o/r/README.md", "must name a .gguf file"},
		{"hf.co/o/r/x.gguf:Q4_0", "must name a .gguf file"},
	}
	for _, tc := range bad {
		_, err := ParseRef(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRef(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	if got := (Ref{Owner: "o", Repo: "r", Quant: "Q8_0"}).String(); got != "hf.co/o/r:Q8_0" {
		t.Errorf("String() = %q", got)
	}
}

func TestQuantTag(t *testing.T) {
	tests := map[string]string{
		"GLM-4.7-Flash-Q4_K_M.gguf":                 "Q4_K_M",
		"DeepSeek-V2-Lite-Chat.Q8_0.gguf":           "Q8_0",
		"deepseek-v2-lite-chat-q4_k_m.gguf":         "Q4_K_M",
		"Youtu-LLM-2B-F16.gguf":                     "F16",
		"GLM-4.7-Flash-bf16-00001-of-00002.gguf":    "BF16",
		"GLM-4.7-Flash-UD-Q4_K_XL.gguf":             "Q4_K_XL",
		"DeepSeek-V2-Lite-Chat_IQ4_XS.gguf":         "IQ4_XS",
		"sub/dir/model.IQ2_XXS.gguf":                "IQ2_XXS",
		"gpt-oss-20b-MXFP4.gguf":                    "MXFP4",
		"model-Q4_K_M-imat.gguf":                    "Q4_K_M",
		"model.gguf":                                "",
		"Qwen2-7B.gguf":                             "", // "Qwen2" is no quantization
		"mmproj-model-f16.gguf":                     "F16",
		"DeepSeek-V2-Lite-Chat.Q4_K_S.v2.gguf":      "Q4_K_S",
		"chinese-llama-2-7b.Q4_0_4_4.gguf":          "Q4_0_4_4",
		"tiny-youtu-q4_0-00002-of-00003.gguf":       "Q4_0",
		"DeepSeek-V2-Lite-Chat-Q4_K_M-GGUF.Q4.gguf": "Q4",
	}
	for file, want := range tests {
		if got := quantTag(file); got != want {
			t.Errorf("quantTag(%q) = %q, want %q", file, got, want)
		}
	}
}

func files(paths ...string) []RemoteFile {
	out := make([]RemoteFile, len(paths))
	for i, p := range paths {
		out[i] = RemoteFile{Path: p, Size: int64(1000 + i)}
	}
	return out
}

func TestChoose(t *testing.T) {
	bartowski := files(
		"GLM-4.7-Flash-Q8_0.gguf", "GLM-4.7-Flash-Q6_K.gguf", "GLM-4.7-Flash-Q4_K_S.gguf",
		"GLM-4.7-Flash-Q4_K_M.gguf", "GLM-4.7-Flash-IQ4_XS.gguf", "GLM-4.7-Flash-UD-Q4_K_XL.gguf",
		"GLM-4.7-Flash-bf16/GLM-4.7-Flash-bf16-00001-of-00002.gguf",
		"GLM-4.7-Flash-bf16/GLM-4.7-Flash-bf16-00002-of-00002.gguf",
		"mmproj-GLM-4.7-Flash-f16.gguf", "README.md", "GLM-4.7-Flash.imatrix",
	)
	tests := []struct {
		name  string
		ref   Ref
		files []RemoteFile
		want  string // chosen file, or an error's text
		why   string
	}{
		{"default is Q4_K_M", Ref{}, bartowski, "GLM-4.7-Flash-Q4_K_M.gguf", "default Q4_K_M"},
		{"tag case-insensitive", Ref{Quant: "q8_0"}, bartowski, "GLM-4.7-Flash-Q8_0.gguf", "quantization Q8_0"},
		{"Q4_K is not Q4_K_M", Ref{Quant: "Q4_K"}, bartowski, `no GGUF file for quantization "Q4_K"`, ""},
		{"name part", Ref{Quant: "UD-Q4_K_XL"}, bartowski, "GLM-4.7-Flash-UD-Q4_K_XL.gguf", "quantization UD-Q4_K_XL"},
		{"tag of a prefixed name", Ref{Quant: "Q4_K_XL"}, bartowski, "GLM-4.7-Flash-UD-Q4_K_XL.gguf", ""},
		{"exact file", Ref{File: "GLM-4.7-Flash-Q6_K.gguf"}, bartowski, "GLM-4.7-Flash-Q6_K.gguf", ""},
		{"split refused", Ref{Quant: "BF16"}, bartowski, "BF16 (split in 2) is split into 2 files (GLM-4.7-Flash-bf16/GLM-4.7-Flash-bf16-00001-of-00002.gguf, ...); latent reads single-file GGUF only", ""},
		{"quant not found lists what is there", Ref{Quant: "Q2_K"}, bartowski,
			`no GGUF file for quantization "Q2_K"; available: Q4_K_M, Q4_K_S, Q6_K, Q8_0, IQ4_XS, Q4_K_XL, BF16 (split in 2)`, ""},
		{"no Q4_K_M: nearest", Ref{}, files("m-F16.gguf", "m-Q8_0.gguf", "m-Q6_K.gguf"), "m-Q6_K.gguf", "default Q6_K (no Q4_K_M here)"},
		{"no Q4_K_M: Q4_0 before Q5", Ref{}, files("m.Q5_K_M.gguf", "m.Q4_0.gguf"), "m.Q4_0.gguf", ""},
		{"untagged only", Ref{}, files("model.gguf"), "model.gguf", "default model.gguf (no Q4_K_M here)"},
		{"single file before split", Ref{}, files("a-Q4_K_M-00001-of-00002.gguf", "a-Q4_K_M-00002-of-00002.gguf", "a-Q8_0.gguf"), "a-Q8_0.gguf", ""},
		{"mmproj never by default", Ref{}, files("mmproj-f16.gguf"), "has no GGUF model files", ""},
		{"no gguf", Ref{}, files("model.safetensors", "config.json"), "has no GGUF files", ""},
		{"shortest name wins a tie", Ref{Quant: "Q4_K_M"}, files("m-Q4_K_M-imat.gguf", "m-Q4_K_M.gguf"), "m-Q4_K_M.gguf", ""},
		{"missing file", Ref{File: "x.gguf"}, files("m-Q4_K_M.gguf"), "no file x.gguf in the repository (it has: Q4_K_M)", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ref.Owner, tc.ref.Repo = "o", "r"
			m, why, err := choose(tc.ref, tc.files)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q, want %q", err, tc.want)
				}
				return
			}
			if m.Files[0].Path != tc.want {
				t.Fatalf("chose %s, want %s", m.Files[0].Path, tc.want)
			}
			if tc.why != "" && why != tc.why {
				t.Errorf("why %q, want %q", why, tc.why)
			}
		})
	}
}

func TestLooksLikePath(t *testing.T) {
	for ref, want := range map[string]bool{
		"model.gguf": true, "./m": true, "/abs/m": true, "dir/sub/m": true, "~/m": true,
		"owner/repo": false, "hf.co/o/r": false, "hf.co/o/r/x.gguf": false, "glm-4.7-flash": false,
	} {
		if got := looksLikePath(ref); got != want {
			t.Errorf("looksLikePath(%q) = %v, want %v", ref, got, want)
		}
	}
}
