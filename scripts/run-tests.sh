#!/usr/bin/env bash
# Every test: the release build's suite (unit, exactness on real vocabularies, CLI), then the
# same suite at reduced scale under AddressSanitizer + UndefinedBehaviorSanitizer (clang-14),
# then each libFuzzer target for a bounded time. Ends with one "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SAN_BUILD=${SAN_BUILD:-build-san}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
passed=0
failed=0
step() { echo; echo "==== $*"; }
count_ctest() {  # parses "N% tests passed, F tests failed out of T"
  local log=$1 line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then failed=$((failed + 1)); return; fi
  local f t
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
  t=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/')
  passed=$((passed + t - f)); failed=$((failed + f))
}

if [ ! -d ../shared/data ]; then
  echo "note: ../shared/data is absent; tests that need the shared reference data will SKIP"
fi

step "release build"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; echo "0 passed, 1 failed"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" || { echo "0 passed, 1 failed"; exit 1; }

step "release tests"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" 2>&1 | tee "$BUILD/ctest.log"
count_ctest "$BUILD/ctest.log"

step "sanitizer build (clang-14, ASan + UBSan, libFuzzer targets)"
CC=clang-14 CXX=clang++-14 cmake -S . -B "$SAN_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_FUZZ=ON -DLOCKSTEP_BUILD_BENCH=OFF \
  > "$SAN_BUILD.configure.log" 2>&1 || { cat "$SAN_BUILD.configure.log"; failed=$((failed + 1)); }
if cmake --build "$SAN_BUILD" -j "$JOBS"; then
  step "sanitizer tests (LOCKSTEP_TEST_SCALE=0.1)"
  LOCKSTEP_TEST_SCALE=0.1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$SAN_BUILD" --output-on-failure -j "$JOBS" 2>&1 | tee "$SAN_BUILD/ctest.log"
  count_ctest "$SAN_BUILD/ctest.log"
  step "fuzzing, ${FUZZ_SECONDS}s per target"
  for f in "$SAN_BUILD"/fuzz/*_fuzz; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus="$SAN_BUILD/fuzz/corpus-$name"
    mkdir -p "$corpus"
    seeds="fuzz/seeds/${name%_fuzz}"
    args=("$corpus")
    [ -d "$seeds" ] && args+=("$seeds")
    if "$f" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
         -print_final_stats=1 -artifact_prefix="$SAN_BUILD/fuzz/" "${args[@]}" \
         > "$SAN_BUILD/fuzz/$name.log" 2>&1; then
      echo "$name: no findings ($(grep -E 'stat::number_of_executed_units' "$SAN_BUILD/fuzz/$name.log" | awk '{print $2}') runs)"
      passed=$((passed + 1))
    else
      echo "$name: FINDING"; tail -40 "$SAN_BUILD/fuzz/$name.log"
      failed=$((failed + 1))
    fi
  done
else
  failed=$((failed + 1))
fi

echo
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
