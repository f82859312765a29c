package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/latent-ai/latent/hub"
	"github.com/latent-ai/latent/model"
	"github.com/latent-ai/latent/server"
)

func newServeCmd() *cobra.Command {
	var (
		host, apiKey, name string
		port, queue        int
		drain              time.Duration
		verbose            bool
		opts               model.Options
	)
	cmd := &cobra.Command{
		Use:   "serve MODEL [--host 127.0.0.1] [--port 11434] [--api-key KEY] [--ctx N]",
		Short: "Serve a model over the OpenAI and Ollama HTTP APIs, with a chat page at /",
		Long: `Serve a model over HTTP until interrupted:

  OpenAI   POST /v1/chat/completions, POST /v1/completions, GET /v1/models
  Ollama   POST /api/chat, POST /api/generate, GET /api/tags, POST /api/show, GET /api/version
  also     GET / (a chat page), GET /health, GET /metrics (Prometheus)

MODEL is a .gguf file or a model reference, pulled on first use. Requests take
turns on the model in arrival order; when --queue of them are waiting, more get
429. SIGINT or SIGTERM stops accepting requests and lets those in flight finish
for up to --drain before exiting.`,
		Args: oneArg("model"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d is not a TCP port (0-65535)", port)
			}
			if queue < 1 {
				return fmt.Errorf("--queue %d: give at least 1", queue)
			}
			if drain <= 0 {
				return fmt.Errorf("--drain %v: give a positive duration", drain)
			}
			if apiKey == "" {
				apiKey = os.Getenv("LATENT_API_KEY")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errOut := cmd.ErrOrStderr()

			path, err := hub.Resolve(ctx, args[0], hub.Options{Progress: errOut})
			if err != nil {
				return err
			}
			if name == "" {
				name = servedName(args[0], path)
			}
			start := time.Now()
			loadOpts, clearMeter := startLoadMeter(cmd, opts)
			m, lm, err := server.Load(path, name, loadOpts)
			clearMeter()
			if err != nil {
				return err
			}
			defer func() {
				if cerr := lm.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("close %s: %w", path, cerr)
				}
			}()

			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))
			srv, err := server.New(server.Config{Model: m, APIKey: apiKey, QueueSize: queue, DrainTimeout: drain, Version: version, Log: log})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("listen on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
			}
			fmt.Fprintf(errOut, "latent: serving %s (context %d, loaded in %.2f s) on http://%s/\n",
				name, m.Net.Context(), time.Since(start).Seconds(), ln.Addr())
			if apiKey == "" && !isLoopback(host) {
				fmt.Fprintf(errOut, "latent: warning: listening on %s without --api-key: anyone who can reach it can use the model\n", host)
			}
			if err := srv.Serve(ctx, ln); err != nil {
				return err
			}
			fmt.Fprintln(errOut, "latent: stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	f.IntVar(&port, "port", 11434, "TCP port (0: any free port)")
	f.StringVar(&apiKey, "api-key", "", "require Authorization: Bearer KEY on API requests (default $LATENT_API_KEY)")
	f.StringVar(&name, "name", "", "model name clients see (default: the reference, or the file name without .gguf)")
	f.IntVar(&queue, "queue", 64, "requests that may wait for the model; one more gets 429")
	f.DurationVar(&drain, "drain", 10*time.Second, "on SIGINT/SIGTERM, how long requests in flight may take to finish")
	f.BoolVarP(&verbose, "verbose", "v", false, "log every request")
	addLoadFlags(cmd, &opts)
	return cmd
}

// servedName is the name a model is served under: a file's name without
// .gguf, or the reference as given.
func servedName(ref, path string) string {
	if st, err := os.Stat(ref); err == nil && st.Mode().IsRegular() {
		return strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	return ref
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
