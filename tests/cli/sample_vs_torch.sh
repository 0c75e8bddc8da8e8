#!/usr/bin/env bash
# strata sample: --sample-every prints samples during training; greedy decoding (top-k 1) of a checkpoint equals PyTorch's greedy decoding of the
# same weights exported to safetensors, token for token for 50 tokens; the key/value cache gives
# the tokens that recomputing the whole context gives (120 seeded draws, past the context); text output is the ids' bytes; llm.c's
# tokenizer file is read (its names printed) and a damaged one is refused with a sentence.
# usage: sample_vs_torch.sh <strata> <python with torch> <tests/reference>
STRATA=$1; PYTHON=$2; REFERENCE=$3
set -euo pipefail
work=$(mktemp -d /tmp/strata-sample-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$STRATA" train --model tiny --steps 200 --batch-size 8 --seq-len 64 --save "$work/ckpt" --metrics "" --val-every 0 \
  --log-every 1000 --threads 2 --sample-every 100 --sample-tokens 20 > "$work/train.log" 2>&1 \
  || { cat "$work/train.log"; fail "training failed"; }
[ "$(grep -c '^sample ' "$work/train.log")" -eq 2 ] || { cat "$work/train.log"; fail "--sample-every 100 did not sample twice"; }
echo "ok: --sample-every: $(grep '^sample ' "$work/train.log" | tail -1)"
"$STRATA" export "$work/ckpt" --out "$work/model.safetensors" > /dev/null
prompt="The sum of"
greedy=(sample "$work/ckpt" --prompt "$prompt" --tokens 50 --top-k 1 --threads 2)
ours=$("$STRATA" "${greedy[@]}" --ids 2> "$work/sample.err") || { cat "$work/sample.err"; fail "sample failed"; }
theirs=$(PYTHONPATH="$REFERENCE" "$PYTHON" "$REFERENCE/greedy_reference.py" "$work/model.safetensors" \
  --prompt "$prompt" --tokens 50)
[ "$(echo $ours | wc -w)" -eq $((${#prompt} + 50)) ] || fail "expected ${#prompt} + 50 ids, got: $ours"
[ "$(echo $ours)" = "$(echo $theirs)" ] || fail "greedy tokens differ from PyTorch's:
  strata:  $ours
  pytorch: $theirs"
echo "ok: 50 greedy tokens equal PyTorch's: $ours"

# 120 tokens: past the context of 64, where both keep the newer half and go on.
long=(sample "$work/ckpt" --prompt "$prompt" --tokens 120 --temperature 0.9 --top-k 20 --seed 5 --ids --threads 2)
cached=$("$STRATA" "${long[@]}" 2> /dev/null)
recomputed=$("$STRATA" "${long[@]}" --no-cache 2> /dev/null)
[ "$(echo $cached | wc -w)" -eq $((${#prompt} + 120)) ] || fail "expected ${#prompt} + 120 ids, got: $cached"
[ "$(echo $recomputed)" = "$(echo $cached)" ] || fail "the cache's tokens differ from recomputing the context:
  cache:      $cached
  recomputed: $recomputed"
echo "ok: the key/value cache gives the tokens of recomputing the whole context, past the context's length too"

"$STRATA" "${greedy[@]}" > "$work/text.out" 2> /dev/null
/usr/bin/python3 -c "import sys; sys.stdout.buffer.write(bytes(int(t) for t in sys.argv[1:]) + b'\n')" $ours \
  > "$work/expected.out"
cmp -s "$work/text.out" "$work/expected.out" || fail "the text is not the ids' bytes: $(cat "$work/text.out")"
echo "ok: text output: $(cat "$work/text.out")"

# llm.c's format, version 2: token i is named <i>, end-of-text 255.
/usr/bin/python3 - "$work/tokenizer.bin" <<'PY'
import struct, sys
names = [f"<{i}>".encode() for i in range(256)]
header = [20240328, 2, 256, 255] + [0] * 252
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256I", *header))
    for n in names:
        f.write(bytes([len(n)]) + n)
PY
named=$("$STRATA" "${greedy[@]}" --tokenizer "$work/tokenizer.bin" 2> /dev/null)
expected=$(printf '<%s>' $ours)
[ "$named" = "$expected" ] || fail "tokenizer names: '$named' vs '$expected'"
echo "ok: the tokenizer file names the tokens"

refused() {  # <file> <sentence>
  set +e
  out=$("$STRATA" "${greedy[@]}" --tokenizer "$1" 2>&1)
  code=$?
  set -e
  [ "$code" -eq 2 ] || fail "a damaged tokenizer exited $code, not 2: $out"
  echo "$out" | grep -q -- "$2" || fail "expected '$2', got: $out"
  echo "ok: refused: $(echo "$out" | tail -1)"
}
head -c 2000 "$work/tokenizer.bin" > "$work/cut.bin"
refused "$work/cut.bin" "tokenizer '$work/cut.bin' ends after .* of its 256 tokens\|runs past the end"
printf 'GPT2' | dd of="$work/tokenizer.bin" bs=1 seek=0 conv=notrunc status=none
refused "$work/tokenizer.bin" "is not an llm.c tokenizer file"
