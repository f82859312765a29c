#!/bin/bash
# One device call: GPU tests, a memcheck pass, then youtu decode speed.
# Logs under $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
export LATENT_KERNEL_CACHE=/tmp/latent-kc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
(cd backend/cuda && timeout 240 ../../.bin/cuda.test -test.v -test.run "${TESTS:-Golden|MatMul|Dequant}" 2>&1 | tee $OUT/tests.log |
	grep -E "^(--- |PASS|FAIL|ok)|deviation|differ|rror|panic|\] =" | head -40)
if [ -n "$SANITIZE" ]; then
	(cd backend/cuda && timeout 200 compute-sanitizer --tool memcheck ../../.bin/cuda.test -test.run "$SANITIZE" 2>&1 | tail -4)
fi
for m in ${MODELS:-youtu-llm-2b}; do
	[ -f /tmp/$m.gguf ] || .bin/latent synth --preset $m --type q4_0 -o /tmp/$m.gguf >/dev/null 2>&1
	echo "$m: $(.bin/latent bench /tmp/$m.gguf --backend cuda ${BENCH:--p 512 -n 128 --depth 0 --reps 2} 2>&1 | grep -E "^ *cuda " | awk '{printf "d%s %s tok/s  ", $3, $5}')" | tee -a $OUT/bench.log
done
for m in ${FULL:-}; do
	[ -f /tmp/$m.gguf ] || .bin/latent synth --preset $m --type q4_0 -o /tmp/$m.gguf >/dev/null 2>&1
	.bin/latent bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --depth 0,4096 --reps 2 2>&1 | grep -E "^ *(backend|cuda) " | tee -a $OUT/bench-full.txt
done
for m in ${PROFILE:-}; do
	.bin/latent profile /tmp/$m.gguf --top 12 > $OUT/profile-$m.txt 2>&1; head -${PLINES:-14} $OUT/profile-$m.txt
	.bin/latent profile /tmp/$m.gguf --each > $OUT/each-$m.txt 2>&1
done
