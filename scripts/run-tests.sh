#!/usr/bin/env bash
# Every test: the release build's suite (unit, exactness on real vocabularies, CLI), then the
# same suite at reduced scale under AddressSanitizer + UndefinedBehaviorSanitizer (clang-14),
# then the concurrency tests under ThreadSanitizer (clang-14), then each libFuzzer target for a
# bounded time (an input slower than its timeout is a finding, like a crash). Ends with one
# "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SAN_BUILD=${SAN_BUILD:-build-san}
TSAN_BUILD=${TSAN_BUILD:-build-tsan}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-5}                  # seconds per input (parsers)
FUZZ_COMPILE_TIMEOUT=${FUZZ_COMPILE_TIMEOUT:-30}  # targets that compile for a vocabulary
passed=0
failed=0
step() { echo; echo "==== $* (at ${SECONDS} s)"; }
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
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_TESTS=ON \
  -DLOCKSTEP_BUILD_BENCH=ON > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; echo "0 passed, 1 failed"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" || { echo "0 passed, 1 failed"; exit 1; }

step "release tests"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" 2>&1 | tee "$BUILD/ctest.log"
count_ctest "$BUILD/ctest.log"

# Line tables are all a sanitizer report needs (file:line in every frame); full debug info made
# this build about 15% slower to compile (schema_compile.cc: 52 s against 44 s under clang-14).
step "sanitizer build (clang-14, ASan + UBSan, libFuzzer targets)"
CC=clang-14 CXX=clang++-14 cmake -S . -B "$SAN_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_FUZZ=ON -DLOCKSTEP_BUILD_TESTS=ON -DLOCKSTEP_BUILD_BENCH=OFF \
  -DLOCKSTEP_TEST_PER_BINARY=ON \
  > "$SAN_BUILD.configure.log" 2>&1 || { cat "$SAN_BUILD.configure.log"; failed=$((failed + 1)); }
san_built=0
if cmake --build "$SAN_BUILD" -j "$JOBS"; then
  san_built=1
  # A twentieth of the release suite's work (each test keeps its floor, such as 20 walk steps
  # per schema, and the exactness walks' brute-force masks try a sample of the vocabulary:
  # tests/util/grammar_walk.h): the sanitizers look for memory and UB errors along the same
  # paths; exactness at full scale is the release run's. Each test binary runs as one process
  # (LOCKSTEP_TEST_PER_BINARY): under ASan a process start with a vocabulary load costs ~1.3 s,
  # once per binary instead of once per test. (At 0.1 this step took 25 of a 68-minute CI run;
  # at 0.05 with whole-vocabulary brute force, 1,043 s of a 49-minute run; with the sample,
  # 735 s; one process per binary, 561 s.)
  step "sanitizer tests (LOCKSTEP_TEST_SCALE=0.05)"
  LOCKSTEP_TEST_SCALE=0.05 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$SAN_BUILD" --output-on-failure -j "$JOBS" -E '^concurrency[.]' 2>&1 \
    | tee "$SAN_BUILD/ctest.log"
  count_ctest "$SAN_BUILD/ctest.log"
else
  failed=$((failed + 1))
fi

# ThreadSanitizer cannot share a build with ASan, and only the concurrency tests (named
# "concurrency.*") run many threads over shared stores: this build compiles that one target,
# with line tables only (all a race report needs; a third less compile time than -g).
# A race report fails the test (halt_on_error); no suppressions.
step "thread sanitizer build (clang-14, TSan)"
tsan_start=$SECONDS
if CC=clang-14 CXX=clang++-14 cmake -S . -B "$TSAN_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
     -DLOCKSTEP_TSAN=ON -DLOCKSTEP_BUILD_TESTS=ON -DLOCKSTEP_BUILD_BENCH=OFF -DLOCKSTEP_BUILD_PYTHON=OFF \
     -DLOCKSTEP_BUILD_CLI=OFF > "$TSAN_BUILD.configure.log" 2>&1 \
   || { cat "$TSAN_BUILD.configure.log"; false; } \
   && cmake --build "$TSAN_BUILD" -j "$JOBS" --target concurrency_test; then
  step "thread sanitizer tests (concurrency.*, LOCKSTEP_TEST_SCALE=1)"
  LOCKSTEP_TEST_SCALE=1 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    ctest --test-dir "$TSAN_BUILD" -R '^concurrency[.]' --output-on-failure -j "$JOBS" 2>&1 \
    | tee "$TSAN_BUILD/ctest.log"
  count_ctest "$TSAN_BUILD/ctest.log"
else
  failed=$((failed + 1))
fi
echo "thread sanitizer step: $((SECONDS - tsan_start)) s (configure, build, run)"

# A slow input is a finding like a crash: libFuzzer stops at the first input that runs over
# -timeout seconds (wall clock), writes it as timeout-<sha1> and exits non-zero. The parser
# targets take microseconds per input (40k-370k inputs in 15 s under ASan), so FUZZ_TIMEOUT=5
# flags an input 10^5 times slower than usual and leaves room for a loaded machine. The targets
# that compile constraints for a vocabulary take milliseconds per input, but the first input that
# uses a big JSON Schema format builds its automaton for the whole process (email, 25k states:
# 0.54 s in a release build, about 9 s of CPU under ASan + UBSan and 18-26 s of wall clock on a
# loaded 2-core machine; hostname 5 s of CPU), so they get FUZZ_COMPILE_TIMEOUT=30: at 5 s (and
# at 10 s on a loaded machine) the bundled seed fuzz/seeds/schema_compile/email is a timeout.
# The targets run $JOBS at a time (each is one process on one core; most of a target's wall
# clock under ASan is its start-up, loading a vocabulary), each into its own log and result file,
# reported in a fixed order.
fuzz_one() {  # target -> $SAN_BUILD/fuzz/<name>.result: "ok RUNS" or "finding TEXT"
  local f=$1 name corpus log seeds timeout rc kind input runs
  name=$(basename "$f")
  corpus="$SAN_BUILD/fuzz/corpus-$name"
  log="$SAN_BUILD/fuzz/$name.log"
  mkdir -p "$corpus"
  seeds="fuzz/seeds/${name%_fuzz}"
  local args=("$corpus")
  [ -d "$seeds" ] && args+=("$seeds")
  case "$name" in
    artifact_fuzz | capi_fuzz | grammar_matcher_fuzz | schema_compile_fuzz | structured_fuzz | \
      request_fuzz)
      timeout=$FUZZ_COMPILE_TIMEOUT ;;
    *) timeout=$FUZZ_TIMEOUT ;;
  esac
  if "$f" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout="$timeout" \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$SAN_BUILD/fuzz/" \
       "${args[@]}" > "$log" 2>&1; then
    runs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "ok $runs" > "$SAN_BUILD/fuzz/$name.result"
  else
    rc=$?
    # libFuzzer's or the sanitizer's summary ("libFuzzer: timeout", "libFuzzer: deadly
    # signal", "AddressSanitizer: heap-buffer-overflow ...") and the input it wrote.
    kind=$(grep -m1 -E '^SUMMARY: ' "$log" | sed -E 's/^SUMMARY: //')
    input=$(grep -m1 -oE 'Test unit written to [^ ]+' "$log" | sed -E 's/^.* to //')
    case "$kind" in
      *"libFuzzer: timeout"*) kind="$kind (an input ran over ${timeout}s)" ;;
    esac
    echo "finding ${kind:-exit status $rc}${input:+; input: $input}" > "$SAN_BUILD/fuzz/$name.result"
  fi
}
if [ "$san_built" -eq 1 ]; then
  step "fuzzing, ${FUZZ_SECONDS}s per target, $JOBS at a time (an input over ${FUZZ_TIMEOUT}s, or" \
    "${FUZZ_COMPILE_TIMEOUT}s for compiling targets, is a finding)"
  targets=()
  for f in "$SAN_BUILD"/fuzz/*_fuzz; do
    [ -f "$f" ] && [ -x "$f" ] || continue  # (the corpus-*_fuzz directories match too)
    targets+=("$f")
    rm -f "$SAN_BUILD/fuzz/$(basename "$f").result"
  done
  running=0
  for f in "${targets[@]}"; do
    if [ "$running" -ge "$JOBS" ]; then
      wait -n
      running=$((running - 1))
    fi
    fuzz_one "$f" &
    running=$((running + 1))
  done
  wait
  for f in "${targets[@]}"; do
    name=$(basename "$f")
    result=$(cat "$SAN_BUILD/fuzz/$name.result" 2>/dev/null || echo "finding no result")
    if [ "${result%% *}" = ok ]; then
      echo "$name: no findings (${result#ok } runs)"
      passed=$((passed + 1))
    else
      echo "$name: FINDING: ${result#finding }"
      tail -40 "$SAN_BUILD/fuzz/$name.log"
      failed=$((failed + 1))
    fi
  done
fi
echo
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
