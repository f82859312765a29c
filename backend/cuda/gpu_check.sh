#!/bin/bash
# One device-machine session: kernel tests, golden logits on the GPU, then
# decode speed on synthesized models. Run from the repository root with
# .bin (latent, cuda.test) and .golden carried. Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LATENT_KERNEL_CACHE=/tmp/latent-kc
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
(cd backend/cuda && ../../.bin/cuda.test -test.v -test.run "${TESTS:-.}" 2>&1 | tee $OUT/tests.log |
	grep -E "^(=== RUN|--- |PASS|FAIL|ok)|deviation|rror|panic|_test.go" | head -${LINES:-80})
# speed: synthesized models at the real shapes
for m in ${MODELS:-youtu-llm-2b}; do
	[ -f /tmp/$m.gguf ] || .bin/latent synth --preset $m --type q4_0 -o /tmp/$m.gguf 2>&1 | tail -1
	.bin/latent bench /tmp/$m.gguf --backend cuda ${BENCH:--p 64 -n 64 --reps 2} 2>&1 | tail -4 | tee -a $OUT/bench.log
done
for m in ${PROFILE:-}; do
	.bin/latent profile /tmp/$m.gguf --top 14 2>&1 | tee -a $OUT/profile.log | head -20
done
