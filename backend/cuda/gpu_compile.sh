#!/bin/bash
# One device call: cold kernel compiles, each with an empty kernel cache
# (latent passes NVRTC --no-cache, so each is a real compile), for every
# model and build in BINS (default: .bin/latent-old and .bin/latent, those
# that are there), alternated, ROUNDS times. The figures are the first
# line of `latent profile`, which says how long the load waited for its
# kernels, and its second, where the weights' upload spent its time.
# LAYERS set makes the files that many layers deep: the kernels
# depend only on the shapes and types, which two layers already have (a
# dense one, then the MoE ones), and the loads take seconds less. EVICT=1
# drops NVRTC's library files from the page cache before each run, as on
# a machine that has not compiled since it started.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
MODELS=${MODELS:-youtu-llm-2b deepseek-v2-lite glm-4.7-flash}
BINS=${BINS:-.bin/latent-old .bin/latent}
file() { echo /tmp/$1${LAYERS:+-L$LAYERS}.gguf; }
evict() {
	python3 - <<'PY'
import glob, os
for p in set(glob.glob('/usr/local/cuda*/**/libnvrtc*.so*', recursive=True) + glob.glob('/usr/lib/x86_64-linux-gnu/libnvrtc*.so*')):
    try:
        fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
    except OSError:
        pass
PY
}
for m in $MODELS; do
	[ -f $(file $m) ] || .bin/latent synth --preset $m --type q4_0 ${LAYERS:+--layers $LAYERS} -o $(file $m) >/dev/null 2>&1
done
for r in $(seq ${ROUNDS:-3}); do
	for m in $MODELS; do
		for bin in $BINS; do
			[ -x $bin ] || continue
			kc=$(mktemp -d)
			[ -n "$EVICT" ] && evict
			start=$(date +%s.%N)
			out=$(LATENT_KERNEL_CACHE=$kc $bin profile $(file $m) --top 1 2>&1 | head -2)
			line=$(echo "$out" | head -1) weights=$(echo "$out" | sed -n 2p)
			echo "$r $m $bin: ${line#*kernels; } | ${weights#weights: } (run $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s)" | tee -a $OUT/compile.log
			rm -rf $kc
		done
	done
done
