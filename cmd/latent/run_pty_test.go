//go:build linux || darwin

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestLatentProcess is not a test: it is latent itself, started by the
// terminal tests as a child of a pseudo-terminal (with LATENT_TEST_ARGS
// holding its arguments as a JSON array).
func TestLatentProcess(t *testing.T) {
	raw := os.Getenv("LATENT_TEST_ARGS")
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Args = append([]string{"latent"}, args...)
	main()
	os.Exit(0)
}

// ptyLatent is latent running on a pseudo-terminal, its screen output
// collected as it comes.
type ptyLatent struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	seen int // output before this offset has been matched already
	done chan error
}

func startPTY(t *testing.T, args ...string) *ptyLatent {
	t.Helper()
	js, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLatentProcess$")
	cmd.Env = append(os.Environ(), "LATENT_TEST_ARGS="+string(js), "TERM=xterm", "NO_COLOR=")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("start latent on a pseudo-terminal: %v", err)
	}
	p := &ptyLatent{t: t, cmd: cmd, tty: tty, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once the child is gone
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
		if t.Failed() {
			t.Logf("screen output:\n%s", p.screen())
		}
	})
	return p
}

func (p *ptyLatent) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// send types keys.
func (p *ptyLatent) send(keys string) {
	p.t.Helper()
	if _, err := p.tty.WriteString(keys); err != nil {
		p.t.Fatalf("typing %q: %v", keys, err)
	}
}

// expect waits for output matching re after what was matched before, and
// returns the match and its submatches.
func (p *ptyLatent) expect(re string) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		s := p.out.String()[p.seen:]
		if loc := rx.FindStringSubmatchIndex(s); loc != nil {
			m := make([]string, len(loc)/2)
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = s[loc[2*i]:loc[2*i+1]]
				}
			}
			p.seen += loc[1]
			p.mu.Unlock()
			return m
		}
		p.mu.Unlock()
		select {
		case err := <-p.done:
			p.done <- err
			time.Sleep(100 * time.Millisecond) // the last output
			p.mu.Lock()
			s = p.out.String()[p.seen:]
			p.mu.Unlock()
			if rx.MatchString(s) {
				continue
			}
			p.t.Fatalf("latent exited (%v) before printing %q", err, re)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("no %q within a minute", re)
	return nil
}

// since returns the output after the offset.
func (p *ptyLatent) since(off int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()[off:]
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// promptRe is a fresh prompt waiting for input (after the escape that
// turns bracketed paste on).
const promptRe = `\n(\x1b\[\?2004h)?>>> $`

// A chat driven through a pseudo-terminal as a person would: answers
// stream, the second turn's prompt holds the first turn (the whole first
// prompt comes from the cache), Ctrl-C ends an answer and the chat goes on,
// /bye leaves with status 0.
func TestRunChatInTerminal(t *testing.T) {
	p := startPTY(t, "run", glmChatModel(t), "--verbose", "--temperature", "0", "--ignore-eos", "--backend", "cpu")
	p.expect(`load +[0-9.]+ s`)
	p.expect(`>>> $`)

	// Without thinking, GLM's generation prompt closes the (empty)
	// reasoning block, so the answer is content that later turns repeat.
	p.send("/set nothink\r")
	p.expect(`Set 'enable_thinking' to false`)
	p.send("/set parameter num_predict 12\r")
	p.expect(`Set parameter 'num_predict' to '12'`)

	p.send("Say hello\r")
	first := p.expect(`(?s)Say hello\r\n(.*?)seed +\d+\r\nprompt +(\d+) tokens, `)
	if strings.TrimSpace(first[1]) == "" {
		t.Errorf("no answer before the timings")
	}
	p1 := atoi(t, first[2])
	p.expect(`generate +12 tokens, .*stop: length`)
	p.expect(promptRe)

	p.send("And again\r")
	second := p.expect(`prompt +(\d+) tokens \((\d+) cached\), `)
	p2, cached := atoi(t, second[1]), atoi(t, second[2])
	// Turn 2 renders [user, assistant, user]: it begins with all of turn
	// 1's prompt, which the cache still holds, and is longer by the answer
	// and the new message.
	if cached < p1 || p2 <= p1+12 {
		t.Errorf("turn 1: %d prompt tokens; turn 2: %d, %d from the cache: the first turn is not in the second prompt", p1, p2, cached)
	}
	p.expect(`generate +12 tokens`)
	p.expect(promptRe)

	// An answer without a limit, interrupted while it streams.
	p.send("/set parameter num_predict -1\r")
	p.expect(`Set parameter 'num_predict' to '-1'`)
	p.send("Tell me a long story\r")
	p.expect(`Tell me a long story\r\n`)
	start := p.seen
	deadline := time.Now().Add(30 * time.Second)
	for len(strings.TrimSpace(p.since(start))) < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.since(start); strings.Contains(got, "stop:") || len(strings.TrimSpace(got)) < 20 {
		t.Fatalf("the answer did not stream: %q", got)
	}
	p.send("\x03")
	p.expect(`generate +\d+ tokens, .*stop: cancelled`)
	p.expect(promptRe)

	// Still there: the next message is answered.
	p.send("/set parameter num_predict 3\r")
	p.expect(`Set parameter 'num_predict' to '3'`)
	p.send("One more\r")
	p.expect(`generate +3 tokens, .*stop: length`)
	p.expect(promptRe)

	p.send("/bye\r")
	if testing.Verbose() {
		defer func() { t.Logf("screen:\n%s", p.screen()) }()
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("after /bye: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("latent did not exit after /bye")
	}
}

// Ctrl-C at the prompt clears the line; twice at an empty prompt exits, as
// does Ctrl-D.
func TestRunChatExitKeys(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
	}{
		{"Ctrl-C twice", "typed\x03\x03\x03"},
		{"Ctrl-D", "\x04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPTY(t, "run", goldenModel("tiny-glm-f32"), "--backend", "cpu")
			p.expect(`>>> $`)
			for _, k := range tc.keys {
				p.send(string(k))
				time.Sleep(50 * time.Millisecond)
			}
			select {
			case err := <-p.done:
				if err != nil {
					t.Errorf("exit: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("latent did not exit")
			}
			out := p.screen()
			if tc.name == "Ctrl-C twice" && strings.Count(out, "(Ctrl-C again, Ctrl-D or /bye to exit)") != 1 {
				t.Errorf("the hint should come once, at the first Ctrl-C on an empty line:\n%q", out)
			}
		})
	}
}
