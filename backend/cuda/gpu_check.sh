#!/bin/bash
# One device call after a change to the CUDA backend: every GPU test, cold
# kernel compiles with and without NVRTC in the page cache (each run's
# first line of `latent profile` gives the load's time, the compile's span
# and what the load waited for it), and decode at an empty context for
# each build in BENCH_BINS (default every .bin/latent* but latent-before),
# alternated, ROUNDS times (default 2). Needs .bin and .golden from
# backend/cuda/gpu_pack.sh, carried and unpacked; for example, the tree
# against b015919 for the compiles and against a branch for decode:
#   here:   backend/cuda/gpu_pack.sh before=b015919 joint=wip/joint-rounding
#   device: (cd .bin && tar xzf pack.tgz) && bash backend/cuda/gpu_check.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
# the bench files, made while the tests run
(for m in youtu-llm-2b glm-4.7-flash deepseek-v2-lite; do
	[ -f /tmp/$m.gguf ] || .bin/latent synth --preset $m --type q4_0 -o /tmp/$m.gguf >/dev/null 2>&1
done) &
(cd backend/cuda && timeout 240 ../../.bin/cuda.test -test.v > $OUT/cudatest.log 2>&1
	echo "cuda.test rc=$? after $(( $(date +%s) - T0 )) s"
	grep -aE -- "--- FAIL|^(ok|PASS|FAIL|panic)" $OUT/cudatest.log | head -30
	grep -aE "largest deviation|cold compile" $OUT/cudatest.log)
wait
# the cold compiles of COMPILE_BINS (default a build before the change,
# gpu_pack.sh before=REF, against this one)
export BINS=${COMPILE_BINS:-.bin/latent-before .bin/latent}
MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=1 bash backend/cuda/gpu_compile.sh
MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=1 EVICT=1 bash backend/cuda/gpu_compile.sh
export LATENT_KERNEL_CACHE=/tmp/latent-kc
for r in $(seq ${ROUNDS:-2}); do
	for m in deepseek-v2-lite glm-4.7-flash youtu-llm-2b; do
		for bin in ${BENCH_BINS:-$(ls .bin/latent* | grep -v latent-before)}; do
			[ -x $bin ] || continue
			[ $(( $(date +%s) - T0 )) -gt ${BUDGET:-560} ] && break 3 # what is left of a call's 600 s
			# the last line: latent bench right-aligns its columns
			echo "$r $m $bin: $(timeout 60 $bin bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --depth 0 --reps 2 2>&1 | tail -1)" | tee -a $OUT/bench.txt
		done
	done
done
echo "call took $(( $(date +%s) - T0 )) s"
