#!/bin/bash
# One device call after a change to the CUDA backend: every GPU test, cold
# kernel compiles with and without NVRTC in the page cache (each run's
# first line of `latent profile` gives the load's time, the compile's span
# and what the load waited for it), and decode at an empty context for
# each build in BENCH_BINS (default every .bin/latent* but latent-before),
# alternated, ROUNDS times (default 2): the Q4_0 files of the three presets,
# or FILES ("PRESET:TYPE ..."; /tmp/PRESET.gguf for q4_0, else
# /tmp/PRESET-TYPE.gguf), at DEPTHS (default 0). COMPILE=0 leaves the
# compiles out. Needs .bin and .golden from
# backend/cuda/gpu_pack.sh, carried and unpacked; for example, the tree
# against b015919 for the compiles and against a branch for decode:
#   here:   backend/cuda/gpu_pack.sh before=b015919 joint=wip/joint-rounding
#   device: (cd .bin && tar xzf pack.tgz) && bash backend/cuda/gpu_check.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
FILES=${FILES:-youtu-llm-2b:q4_0 glm-4.7-flash:q4_0 deepseek-v2-lite:q4_0}
file() { [ ${1#*:} = q4_0 ] && echo /tmp/${1%%:*}.gguf || echo /tmp/${1%%:*}-${1#*:}.gguf; }
# the bench files, made while the tests run
(for f in $FILES; do
	[ -f $(file $f) ] || .bin/latent synth --preset ${f%%:*} --type ${f#*:} -o $(file $f) >/dev/null 2>&1
done) &
(cd backend/cuda && timeout 240 ../../.bin/cuda.test -test.v > $OUT/cudatest.log 2>&1
	echo "cuda.test rc=$? after $(( $(date +%s) - T0 )) s"
	grep -aE -- "--- FAIL|^(ok|PASS|FAIL|panic)" $OUT/cudatest.log | head -30
	grep -aE "largest deviation|cold compile" $OUT/cudatest.log)
wait
# the cold compiles of COMPILE_BINS (default a build before the change,
# gpu_pack.sh before=REF, against this one)
if [ "${COMPILE:-1}" != 0 ]; then
	export BINS=${COMPILE_BINS:-.bin/latent-before .bin/latent}
	MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=1 bash backend/cuda/gpu_compile.sh
	MODELS="glm-4.7-flash youtu-llm-2b" ROUNDS=1 EVICT=1 bash backend/cuda/gpu_compile.sh
fi
export LATENT_KERNEL_CACHE=/tmp/latent-kc
DEPTHS=${DEPTHS:-0}
ndepths=$(echo $DEPTHS | tr ',' '\n' | wc -l) # latent bench prints a line a depth
for r in $(seq ${ROUNDS:-2}); do
	for f in $FILES; do
		for bin in ${BENCH_BINS:-$(ls .bin/latent* | grep -v latent-before)}; do
			[ -x $bin ] || continue
			[ $(( $(date +%s) - T0 )) -gt ${BUDGET:-560} ] && break 3 # what is left of a call's 600 s
			# the last lines, a depth each (latent bench right-aligns its columns)
			echo "$r $f $bin: $(timeout 90 $bin bench $(file $f) --backend cuda -p 512 -n 128 --depth $DEPTHS --reps 2 2>&1 |
				tail -$ndepths | tr -s ' ' | tr '\n' '|')" | tee -a $OUT/bench.txt
		done
	done
done
echo "call took $(( $(date +%s) - T0 )) s"
