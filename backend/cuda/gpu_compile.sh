#!/bin/bash
# One device call: cold kernel compiles, each with an empty kernel cache
# (latent passes NVRTC --no-cache, so each is a real compile), for every
# model and build: .bin/latent and, where it is there, .bin/latent-old,
# alternated, ROUNDS times. The figure is the first line of `latent
# profile`, which says how long the load waited for its kernels. LAYERS
# set makes the files that many layers deep: the kernels depend only on
# the shapes and types, which two layers already have (a dense one, then
# the MoE ones), and the loads take seconds less.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
MODELS=${MODELS:-youtu-llm-2b deepseek-v2-lite glm-4.7-flash}
file() { echo /tmp/$1${LAYERS:+-L$LAYERS}.gguf; }
for m in $MODELS; do
	[ -f $(file $m) ] || .bin/latent synth --preset $m --type q4_0 ${LAYERS:+--layers $LAYERS} -o $(file $m) >/dev/null 2>&1
done
for r in $(seq ${ROUNDS:-3}); do
	for m in $MODELS; do
		for bin in .bin/latent-old .bin/latent; do
			[ -x $bin ] || continue
			kc=$(mktemp -d)
			line=$(LATENT_KERNEL_CACHE=$kc $bin profile $(file $m) --top 1 2>&1 | head -1)
			echo "$r $m $bin: ${line#*kernels }" | tee -a $OUT/compile.log
			rm -rf $kc
		done
	done
done
