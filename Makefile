# Shortcuts for the README's two set-up commands (which work without make installed) and a few
# developer targets.
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: all demo test build bench clean

all: build

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

build:
	bash scripts/install-deps.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_TESTS=ON -DLOCKSTEP_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)

bench: build
	./$(BUILD)/bench/lockstep_bench --benchmark_counters_tabular=true

clean:
	rm -rf $(BUILD) build-san build.configure.log build-san.configure.log
