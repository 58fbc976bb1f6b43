#!/usr/bin/env bash
# README command 1: install what is missing, build (Release), and run the main job: constrained
# generation with the bundled Llama-3 tokenizer and the n-gram logits source trained at build time:
# tool calls under a bundled JSON Schema (checked by `lockstep validate`), then a regex and a grammar.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --demo
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
# Only what the demo runs: the command and the n-gram model it trains at build time.
cmake --build "$BUILD" -j "$(nproc)" --target lockstep_cli lockstep_models
L="./$BUILD/cli/lockstep"
echo
echo "\$ lockstep generate --schema schemas/tools/book_flight.json --seed 3 -n 3 --json"
"$L" generate --schema schemas/tools/book_flight.json --seed 3 -n 3 --json | tee "$BUILD/demo-calls.jsonl"
echo
echo "\$ ... | lockstep validate --schema schemas/tools/book_flight.json --ndjson   # the generated texts"
python3 -c 'import json,sys; [print(json.loads(l)["text"]) for l in sys.stdin]' < "$BUILD/demo-calls.jsonl" \
  | "$L" validate --schema schemas/tools/book_flight.json --ndjson -
REGEX='\{"date": "20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", "email": "[a-z]{3,10}@[a-z]{3,8}\.(com|org|io)"\}'
echo
echo "\$ lockstep generate --tokenizer llama3 --model ngram --seed 7 -n 3 --json --regex '$REGEX'"
"$L" generate --tokenizer llama3 --model ngram --seed 7 -n 3 --json --regex "$REGEX"
echo
echo "\$ lockstep generate --grammar schemas/grammars/tool_calls.gbnf --seed 2 -n 2 --json"
"$L" generate --grammar schemas/grammars/tool_calls.gbnf --seed 2 -n 2 --json
