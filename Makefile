# keel — the commands users type. CMake does the building underneath.
#
#   make            release build (-O2, assertions on): build/keel, tests
#   make test       install missing packages, build, run the whole suite
#   make run        install, build, start a local 3-node cluster
#   make debug      ASan+UBSan build in build-debug/ (clang, with libFuzzer)
#   make check-unit / check-sim / ...   one ctest label on the release build
#   make format     clang-format the sources
#   make faults DURATION=30m   long fault-injection run (release checks)
#   make bench      side-by-side benchmark against Apache ZooKeeper

JOBS    ?= $(shell nproc)
BUILD   ?= build
DEBUG   ?= build-debug
CTEST   := ctest --output-on-failure --no-tests=error -j $(JOBS)

.PHONY: all build debug deps test test-release test-debug run format clean \
        check-unit check-sim check-integration check-compat check-fuzz faults bench

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

debug:
	@cmake -S . -B $(DEBUG) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
	  -DKEEL_SANITIZE=ON -DKEEL_FUZZ=ON >/dev/null
	@cmake --build $(DEBUG) -j $(JOBS)

deps:
	@scripts/install-deps.sh

# The whole suite: unit, sim and fuzz under sanitizers (debug build), then
# unit, sim, integration and compat on the release build that ships. The
# integration and compat tests (keel clusters) run one at a time, beside
# unit and simulator tests (the resource lock in tests/CMakeLists.txt).
test: deps
	@$(MAKE) --no-print-directory test-debug
	@$(MAKE) --no-print-directory test-release

test-debug: debug
	cd $(DEBUG) && $(CTEST) -L 'unit|sim|fuzz'

test-release: build
	cd $(BUILD) && $(CTEST) -L 'unit|sim|integration|compat'

check-%: build
	cd $(BUILD) && $(CTEST) -L $*

run: deps build
	@scripts/run-cluster.sh

faults: deps build
	@scripts/faults.sh $(DURATION)

bench: deps build
	@bench/compare.sh

format:
	@find src sim tests bench -name '*.[ch]' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(DEBUG)
