#!/bin/bash
# Builds what a device call needs, here (the device has no Go): .bin/pack.tgz
# with latent and cuda.test from the working tree and latent-NAME for each
# NAME=REF argument (a commit or branch, built in a worktree under /tmp),
# and .golden/ with the golden files the GPU tests read. Carry both
# (run's carry: [".bin", ".golden"]) and start the call with
# `(cd .bin && tar xzf pack.tgz)`; then, for example,
# `BENCH_BINS=".bin/latent-main .bin/latent" backend/cuda/gpu_check.sh`.
# An argument +NAME=REF also builds REF's cuda.test as cuda.test-NAME (its
# kernels are REF's), so that one call can test several branches.
#   backend/cuda/gpu_pack.sh main=main joint=wip/joint-rounding +kq=wip/kquant-ggml-order
set -e
cd "$(git rev-parse --show-toplevel)"
raw=$(mktemp -d)
build() { CGO_ENABLED=0 go build -ldflags='-s -w' -o "$2" ./cmd/latent; }
build . "$raw/latent"
go test -c -ldflags='-s -w' -o "$raw/cuda.test" ./backend/cuda
for arg in "$@"; do
	tests=${arg%%[!+]*} arg=${arg#+}
	name=${arg%%=*} ref=${arg#*=}
	wt=/tmp/gpu-pack-$name
	git worktree remove --force "$wt" 2>/dev/null || true
	git worktree add -f --detach "$wt" "$ref" >/dev/null
	(cd "$wt" && build . "$raw/latent-$name")
	[ -n "$tests" ] && (cd "$wt" && go test -c -ldflags='-s -w' -o "$raw/cuda.test-$name" ./backend/cuda)
	git worktree remove --force "$wt"
done
mkdir -p .bin .golden
tar czf .bin/pack.tgz -C "$raw" .
rm -rf "$raw"
for d in logits quants; do
	rm -rf ".golden/$d" && cp -r ../shared/golden/$d .golden/
done
# the quantized and f16 models: with the float32 ones (55 MB) a call's
# carry would pass its 64 MiB; the GPU tests skip a model not there
rm -rf .golden/models && mkdir .golden/models
cp ../shared/golden/models/*q[0-9]*.gguf ../shared/golden/models/*f16*.gguf .golden/models/
du -sh .bin/pack.tgz .golden
