#!/usr/bin/env bash
# README command 1: install what is missing, build (Release), and run the main job: constrained
# generation with the bundled Llama-3 tokenizer and the n-gram logits source trained at build time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)"
REGEX='\{"date": "20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", "email": "[a-z]{3,10}@[a-z]{3,8}\.(com|org|io)"\}'
echo
echo "\$ lockstep generate --tokenizer llama3 --model ngram --seed 7 -n 5 --json --regex '$REGEX'"
"./$BUILD/cli/lockstep" generate --tokenizer llama3 --model ngram --seed 7 -n 5 --json \
  --regex "$REGEX"
echo
echo "\$ lockstep generate --grammar schemas/grammars/tool_calls.gbnf --seed 2 -n 3 --json"
"./$BUILD/cli/lockstep" generate --grammar schemas/grammars/tool_calls.gbnf --seed 2 -n 3 --json
