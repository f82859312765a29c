package server

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the browser: $LATENT_CHROMIUM, else Debian's chromium
// (which .ci/run installs), else one on the PATH.
func chromium(t *testing.T) string {
	if p := os.Getenv("LATENT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	// Missing in CI is a failure; a developer without a browser may opt out.
	if os.Getenv("LATENT_SKIP_BROWSER") == "1" {
		t.Skip("no chromium, and LATENT_SKIP_BROWSER=1")
	}
	t.Fatal("chromium not found: install it (apt-get install -y chromium, as .ci/run does), point $LATENT_CHROMIUM at one, or set LATENT_SKIP_BROWSER=1 to skip the browser tests")
	return ""
}

func browser(t *testing.T) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root; the page is our own, on loopback
		chromedp.DisableGPU,
		chromedp.WindowSize(1024, 768),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(10*time.Millisecond))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func TestChatPage(t *testing.T) {
	m := goldenModel(t, "tiny-glm-f32.gguf", 256)
	answer := "<think>Let me think.</think>Here is **bold** and code:\n\n```go\nfmt.Println(\"<b>hi</b>\")\n```\n"
	net := newScriptedNet(m, answer, 1<<20).then(m, strings.Repeat("more words ", 500))
	net.delay = 10 * time.Millisecond
	ts := startServer(t, Config{Model: net.on(m)})
	ctx := browser(t)

	err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/"),
		poll(`document.getElementById("model").textContent === "tiny-glm-f32"`),
		chromedp.SendKeys(chromedp.CSS("#input"), "Show me some code"),
		chromedp.Click(chromedp.CSS("#send")),
		// Part of the answer shows while it is still streaming.
		poll(`document.body.dataset.state === "streaming" && document.querySelector(".msg.assistant .thoughts").textContent.length > 0`),
	)
	if err != nil {
		t.Fatal(err)
	}
	streamedText := eval[string](t, ctx, `document.querySelector(".msg.assistant .thoughts").textContent`)
	if err := chromedp.Do(ctx, poll(`document.querySelector(".msg.assistant").dataset.done === "true"`)); err != nil {
		t.Fatal(err)
	}
	var (
		model           = eval[string](t, ctx, `document.getElementById("model").textContent`)
		stats           = eval[string](t, ctx, `document.getElementById("stats").textContent`)
		reasoning       = eval[string](t, ctx, `document.querySelector(".msg.assistant .thoughts").textContent`)
		reasoningOpen   = eval[bool](t, ctx, `document.querySelector(".msg.assistant details.reasoning").open`)
		reasoningHidden = eval[bool](t, ctx, `document.querySelector(".msg.assistant details.reasoning").hidden`)
		contentHTML     = eval[string](t, ctx, `document.querySelector(".msg.assistant .content").innerHTML`)
		user            = eval[string](t, ctx, `document.querySelector(".msg.user").textContent`)
	)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if streamedText == "" {
		t.Error("nothing showed while streaming")
	}
	if user != "Show me some code" {
		t.Errorf("the question shows as %q", user)
	}
	if reasoning != "Let me think." || reasoningOpen || reasoningHidden {
		t.Errorf("reasoning %q, open %v, hidden %v: want it shown, collapsed", reasoning, reasoningOpen, reasoningHidden)
	}
	wantHTML := `<p>Here is <strong>bold</strong> and code:</p><pre><code class="language-go">fmt.Println("&lt;b&gt;hi&lt;/b&gt;")</code></pre>`
	if contentHTML != wantHTML {
		t.Errorf("answer rendered as\n%s\nwant\n%s", contentHTML, wantHTML)
	}
	if model != "tiny-glm-f32" || !strings.HasSuffix(stats, "tokens/s") {
		t.Errorf("header shows model %q, stats %q", model, stats)
	}
	checkScreenshot(t, shot)

	// A second, long answer: the stop button ends it, in the page and on the server.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#input"), "Go on"),
		chromedp.Click(chromedp.CSS("#send")),
		poll(`document.querySelectorAll(".msg.assistant").length === 2 && document.querySelectorAll(".msg.assistant")[1].querySelector(".content").textContent.length > 20`),
		chromedp.Click(chromedp.CSS("#stop")),
		poll(`document.querySelectorAll(".msg.assistant")[1].dataset.done === "true"`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if meta := eval[string](t, ctx, `document.querySelectorAll(".msg.assistant")[1].querySelector(".meta").textContent`); !strings.Contains(meta, "stopped") {
		t.Errorf("after stop the answer says %q", meta)
	}
	if !waitFor(2*time.Second, func() bool { return !ts.queue.busy() }) {
		t.Error("the server went on generating after the stop button")
	}

	// "New chat" while an answer streams: that answer stays out of the new
	// conversation (the page's history is empty, not one stray answer).
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#input"), "And more"),
		chromedp.Click(chromedp.CSS("#send")),
		poll(`document.querySelectorAll(".msg.assistant").length === 3 && document.querySelectorAll(".msg.assistant")[2].querySelector(".content").textContent.length > 20`),
		chromedp.Click(chromedp.CSS("#new")),
		poll(`document.body.dataset.state === "idle"`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, ctx, `history.length`); n != 0 {
		t.Errorf("after New chat during an answer, the conversation holds %d messages", n)
	}
}

// checkScreenshot saves the screenshot and fails if it is blank: one colour,
// or too few of them to hold text.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "latent-chat-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 500 || b.Dy() < 400 {
		t.Fatalf("screenshot is %dx%d", b.Dx(), b.Dy())
	}
	var n, sum, sumSq float64
	colours := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			lum := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			n++
			sum += lum
			sumSq += lum * lum
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
		}
	}
	mean := sum / n
	variance := sumSq/n - mean*mean
	if variance < 50 || len(colours) < 20 {
		t.Errorf("screenshot looks blank: luminance variance %.1f, %d colours", variance, len(colours))
	}
}

func TestMarkdownRenderer(t *testing.T) {
	ts := startServer(t, Config{Model: goldenModel(t, "tiny-glm-f32.gguf", 64)})
	ctx := browser(t)
	tests := []struct{ in, want string }{
		{"plain text", "<p>plain text</p>"},
		{"<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"},
		{"<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"},
		{"**bold** and *it* and `a<b`", "<p><strong>bold</strong> and <em>it</em> and <code>a&lt;b</code></p>"},
		{"`**not bold**`", "<p><code>**not bold**</code></p>"},
		{"# Title\ntext", "<h1>Title</h1><p>text</p>"},
		{"- one\n- two\n\n1. first\n2. second", "<ul><li>one</li><li>two</li></ul><ol><li>first</li><li>second</li></ol>"},
		{"```\nunclosed <code>", "<pre><code>unclosed &lt;code&gt;</code></pre>"},
		{"```js\nlet a = 1;\n```\nafter", `<pre><code class="language-js">let a = 1;</code></pre><p>after</p>`},
		{"[site](https://example.com/a?b=1&c=2)", `<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">site</a></p>`},
		{"[bad](javascript:alert(1))", "<p>[bad](javascript:alert(1))</p>"},
		{`[x](https://e.com/"onmouseover="alert(1))`, `<p><a href="https://e.com/&quot;onmouseover=&quot;alert(1)" target="_blank" rel="noopener noreferrer">x</a></p>`},
		{"[l](https://a.com/x__init__.py) _after_", `<p><a href="https://a.com/x__init__.py" target="_blank" rel="noopener noreferrer">l</a> <em>after</em></p>`},
		{"[w](https://en.wikipedia.org/wiki/Go_(language))", `<p><a href="https://en.wikipedia.org/wiki/Go_(language)" target="_blank" rel="noopener noreferrer">w</a></p>`},
		{"1. **First**\n\n   Details\n\n2. **Second**", "<ol><li><strong>First</strong> Details</li><li><strong>Second</strong></li></ol>"},
		{"3. three\n4. four", `<ol start="3"><li>three</li><li>four</li></ol>`},
		{"> quoted\n> more", "<blockquote><p>quoted<br>more</p></blockquote>"},
		{"line one\nline two", "<p>line one<br>line two</p>"},
		{"snake_case_name and 2*3*4", "<p>snake_case_name and 2*3*4</p>"},
		{"---", "<hr>"},
	}
	var ins []string
	for _, tc := range tests {
		ins = append(ins, tc.in)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/"), poll(`typeof renderMarkdown === "function"`)); err != nil {
		t.Fatal(err)
	}
	got := eval[[]string](t, ctx, renderAll(ins))
	for i, tc := range tests {
		if got[i] != tc.want {
			t.Errorf("renderMarkdown(%q)\n got %s\nwant %s", tc.in, got[i], tc.want)
		}
	}
}

// renderAll is JavaScript that maps renderMarkdown over the inputs.
func renderAll(ins []string) string {
	var b strings.Builder
	b.WriteString("[")
	for i, in := range ins {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(jsString(in))
	}
	b.WriteString("].map(renderMarkdown)")
	return b.String()
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "<", `\u003c`)
	return `"` + r.Replace(s) + `"`
}
