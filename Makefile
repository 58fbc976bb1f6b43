# The two set-up commands of the README, and the pieces they are made of.
#   make demo  installs what is missing, builds, and runs constrained generation
#   make test  installs what is missing, builds, and runs every test (release, sanitizers, fuzz)
BUILD        ?= build
SAN_BUILD    ?= build-san
JOBS         ?= $(shell nproc)
FUZZ_SECONDS ?= 30
DEMO_REGEX   ?= \{"date": "[0-9]{4}-[0-9]{2}-[0-9]{2}", "email": "[a-z]{3,10}@[a-z]{3,8}\.(com|org|io)"\}

.PHONY: all deps build demo test test-release test-san bench clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/cli/lockstep generate --tokenizer llama3 --model ngram --seed 7 -n 5 --json \
	  --regex '$(DEMO_REGEX)'

test: deps
	@bash scripts/run-tests.sh

bench: build
	./$(BUILD)/bench/lockstep_bench --benchmark_counters_tabular=true

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(BUILD).configure.log $(SAN_BUILD).configure.log
