set -o pipefail
export LATENT_KERNEL_CACHE=/tmp/latent-kc
(cd backend/cuda && ../../.bin/cuda.test -test.v -test.run 'Golden|MLADecode' 2>&1 | grep -E "deviation|FAIL|PASS|differ" | head -20)
(cd backend/cuda && timeout 200 compute-sanitizer --tool memcheck ../../.bin/cuda.test -test.run 'Golden/tiny-glm-q4_k_m|MatMul' 2>&1 | tail -3)
(cd backend/cuda && ../../.bin/cuda.test -test.run '^$' -test.bench LaunchChain -test.benchtime 20x -test.count 2 2>&1 | grep Bench | tee -a $OUT/bench.txt)
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do
  [ -f /tmp/$m.gguf ] || .bin/latent synth --preset $m --type q4_0 -o /tmp/$m.gguf >/dev/null 2>&1
  .bin/latent bench /tmp/$m.gguf --backend cuda -p 512 -n 128 --depth 0,4096 --reps 2 2>&1 | tail -3 | tee -a $OUT/bench.txt
done
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do  # long contexts: mla_decode from MLAFrom (1024) positions
  .bin/latent bench /tmp/$m.gguf --backend cuda -p 128 -n 128 --depth 0,4096,8192,16384 --reps 1 2>&1 | tail -4 | tee -a $OUT/bench.txt
done
LATENT_CACHE_TYPE=f32 .bin/latent bench /tmp/youtu-llm-2b.gguf --backend cuda -p 512 -n 128 --depth 0,4096 --reps 2 2>&1 | tail -2 | tee -a $OUT/bench.txt
rm -rf /tmp/kc2; LATENT_KERNEL_CACHE=/tmp/kc2 .bin/latent profile /tmp/youtu-llm-2b.gguf --top 1 2>&1 | head -1
LATENT_KERNEL_CACHE=/tmp/kc2 .bin/latent profile /tmp/youtu-llm-2b.gguf --top 1 2>&1 | head -1
for m in youtu-llm-2b deepseek-v2-lite glm-4.7-flash; do .bin/latent profile /tmp/$m.gguf --top 10 > $OUT/profile-$m.txt 2>&1; head -8 $OUT/profile-$m.txt; done
.bin/latent profile /tmp/youtu-llm-2b.gguf --each > $OUT/each-youtu.txt 2>&1
