// Package hub turns model references into local GGUF files: a path, a short
// alias, or a Hugging Face repository (hf.co/OWNER/REPO[:QUANT]) that is
// downloaded into a local store on first use.
package hub

import (
	"io"
	"time"
)

// Options configure where models are stored and how the Hub is reached.
// The zero value uses the environment: $LATENT_MODELS, $HF_ENDPOINT, $HF_TOKEN.
type Options struct {
	// Dir is the model store; empty means $LATENT_MODELS, else
	// os.UserCacheDir()/latent/models.
	Dir string
	// Endpoint is the Hub's base URL; empty means $HF_ENDPOINT, else
	// https://huggingface.co.
	Endpoint string
	// Token is sent as a bearer token to the Hub (never to its CDN);
	// empty means $HF_TOKEN.
	Token string
	// Progress receives pull progress: a bar redrawn in place when it is a
	// terminal, a line now and then otherwise. Nil is silent.
	Progress io.Writer

	// Tests shorten these: the first wait before retrying a cut download
	// (1 s, doubling), the silence that counts as a stall (60 s), and the
	// retries after failures that made no progress (5; -1 for none).
	retryDelay time.Duration
	stall      time.Duration
	retries    int
}
