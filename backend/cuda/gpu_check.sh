#!/bin/bash
# One device call after a change to the CUDA backend: every GPU test, cold
# kernel compiles with and without NVRTC in the page cache, and decode at
# an empty context, .bin/latent-old (where it is there) against .bin/latent.
# Needs .bin/cuda.test (go test -c ./backend/cuda) and .golden/{models,
# logits,quants} copied from ../shared/golden, both carried.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
(cd backend/cuda && timeout 300 ../../.bin/cuda.test -test.v > $OUT/cudatest.log 2>&1
	echo "cuda.test rc=$?"
	grep -E -- "--- FAIL|^(ok|PASS|FAIL|panic)" $OUT/cudatest.log | head -30
	grep -E "largest deviation|cold compile" $OUT/cudatest.log)
MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=2 bash backend/cuda/gpu_compile.sh
MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=1 EVICT=1 bash backend/cuda/gpu_compile.sh
[ -f /tmp/youtu-q4km.gguf ] || .bin/latent synth --preset youtu-llm-2b --type q4_k_m -o /tmp/youtu-q4km.gguf >/dev/null 2>&1
export LATENT_KERNEL_CACHE=/tmp/latent-kc
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash youtu-q4km; do
	for bin in .bin/latent-old .bin/latent; do
		[ -x $bin ] || continue
		# the last line: latent bench right-aligns its columns
		echo "$m $bin: $($bin bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --depth 0 --reps 2 2>&1 | tail -1)" | tee -a $OUT/bench.txt
	done
done
