# tessera: the two Quick-start commands are `make demo` and `make test` (each sets up, builds
# and runs). Everything else is here for developers; docs/development.md has the inner loop.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
# CI (CI=true) builds with warnings as errors; so does `make test WERROR=ON`.
WERROR ?= $(if $(filter true,$(CI)),ON,OFF)
override CMAKE_FLAGS += -DTESSERA_WERROR=$(WERROR)

# Every build tree is configured by scripts/configure_tree: Ninja, ccache as the compiler launcher
# (scripts/setup installs both; the cache is shared by every checkout on the machine) and lld.
# docs/development.md: which command for which change, the trees, the cache.

.PHONY: setup configure build demo screenshots simulate test check unit fuzz tsan shim-sanitize bench reproduce clean deb

setup:
	./scripts/setup

configure: setup
	./scripts/configure_tree $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the platform on one machine (tessera serve on SQLite in a temporary folder, two
# node agents with fake GPUs, tenants, a mix of work run under the shim); it stops what it started.
demo: build
	./scripts/demo_platform.sh $(BUILD)

# The dashboard's screenshots in docs/ui/ (docs/dashboard.md): the browser test against the demo's
# data, writing its screenshots there.
screenshots: build
	node tests/ui/dashboard_test.mjs --tessera $(BUILD)/tessera --ui-dir $(BUILD)/ui --screenshots docs/ui
	node tests/ui/sim_report_test.mjs --tessera $(BUILD)/tessera --screenshots docs/ui

# The trace simulator: every placement policy on the bundled Alibaba default trace, seeds 42-51.
simulate: build
	./$(BUILD)/tessera simulate

# --- the steps of make test (each also a target of its own below) ----------------------------
# The sanitizer trees (tsan, shim-sanitize, fuzz): -O1 -g1, as the sanitizers' own documentation
# suggests (line tables are all a report's stack needs); no benchmarks.
SANITIZER_BUILD_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' -DTESSERA_BUILD_BENCH=OFF -DTESSERA_WERROR=$(WERROR)
# What `make tsan` runs of tessera_concurrency_test (tests/CMakeLists.txt): all of it (the sweep's
# threads, the lease arbiter under threads, the arbiter duty's standby waiter, the store's contract
# and its concurrent group commit on SQLite, every daemon test) but the lease tests between processes, whose share checks are
# timing measurements, and the PostgreSQL backend (ctest runs it, with its server).
TSAN_TESTS = *-RealTimeLeaseTest.*:*/Postgres
# The shim's kill -9 stress under the sanitizers runs SHIM_SANITIZE_KILLS kills instead of 1000.
SHIM_SANITIZE_KILLS ?= 200
FUZZ_SECONDS ?= 15

CONFIGURE_TSAN = ./scripts/configure_tree $(BUILD)-tsan $(SANITIZER_BUILD_FLAGS) -DTESSERA_SANITIZE=thread
CONFIGURE_ASAN = ./scripts/configure_tree build-shim-asan $(SANITIZER_BUILD_FLAGS) -DTESSERA_SANITIZE=address,undefined
RUN_TSAN = env TSAN_OPTIONS=halt_on_error=1 ./$(BUILD)-tsan/tests/tessera_concurrency_test --gtest_filter='$(TSAN_TESTS)'
# The shim's probe processes get the sanitizer runtime preloaded before the shim.
RUN_SHIM_ASAN = env TESSERA_SHIM_TEST_KILLS=$(SHIM_SANITIZE_KILLS) UBSAN_OPTIONS=halt_on_error=1 \
  ./build-shim-asan/tests/tessera_shim_test
RUN_SHIM_TSAN = env TESSERA_SHIM_TEST_KILLS=$(SHIM_SANITIZE_KILLS) TSAN_OPTIONS=halt_on_error=1 \
  ./$(BUILD)-tsan/tests/tessera_shim_test
CTEST = ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# `make test`: every step above, each timed; the closing table (scripts/phase) shows where the
# time went. ctest runs first after the build (the quickest answer); then the fuzzers, then the
# concurrent parts under ThreadSanitizer and the shim under AddressSanitizer+UBSan and TSan.
PHASES = $(CURDIR)/$(BUILD)/make-test-phases.tsv
T = @./scripts/phase run $(PHASES)
test:
	@./scripts/phase start $(PHASES)
	$(T) "setup (scripts/setup)" -- ./scripts/setup
	$(T) "$(BUILD)/: configure (Release)" -- ./scripts/configure_tree $(BUILD) $(CMAKE_FLAGS)
	$(T) "$(BUILD)/: compile" -- cmake --build $(BUILD) -j $(JOBS)
	$(T) "$(BUILD)/: ctest" -- $(CTEST)
	$(T) "$(BUILD)/: compile the benchmarks (not run)" -- cmake --build $(BUILD) -j $(JOBS) --target benchmarks
	$(T) "build-fuzz/: configure + compile (clang ASan+UBSan)" -- env WERROR=$(WERROR) JOBS=$(JOBS) ./tests/fuzz/run.sh --build-only
	$(T) "fuzz: 14 fuzzers x $(FUZZ_SECONDS) s, $(JOBS) at a time" -- env JOBS=$(JOBS) ./tests/fuzz/run.sh --run-only $(FUZZ_SECONDS)
	$(T) "$(BUILD)-tsan/: configure (TSan)" -- $(CONFIGURE_TSAN)
	$(T) "$(BUILD)-tsan/: compile" -- cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_concurrency_test tessera_shim_test
	$(T) "tsan: concurrency suites" -- $(RUN_TSAN)
	$(T) "tsan: shim" -- $(RUN_SHIM_TSAN)
	$(T) "build-shim-asan/: configure (ASan+UBSan)" -- $(CONFIGURE_ASAN)
	$(T) "build-shim-asan/: compile" -- cmake --build build-shim-asan -j $(JOBS) --target tessera_shim_test
	$(T) "asan+ubsan: shim" -- $(RUN_SHIM_ASAN)
	@./scripts/phase report $(PHASES)

# `make check M=daemon`: build and run one module's tests (tests/<module>/ -> tessera_<module>_test)
# through ctest's label for it; the inner loop after a change to one module.
check: configure
	@test -n "$(M)" || { echo "make check: say which module, e.g. make check M=daemon" >&2; exit 2; }
	@test -d tests/$(M) || { echo "make check: no tests/$(M)/ (modules: $$(ls tests | tr '\n' ' '))" >&2; exit 2; }
	@if [ -d tests/$(M) ] && ls tests/$(M)/*_test.cc >/dev/null 2>&1; then \
	  echo "cmake --build $(BUILD) --target tessera_$(M)_test"; cmake --build $(BUILD) -j $(JOBS) --target tessera_$(M)_test; \
	else echo "cmake --build $(BUILD)"; cmake --build $(BUILD) -j $(JOBS); fi
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L '^$(M)$$'

# The Debian package (cmake/TesseraInstall.cmake): $(BUILD)/tessera_<version>_<arch>.deb.
deb: build
	cd $(BUILD) && cpack -G DEB

unit: build
	$(CTEST)

# The fuzzers for FUZZ_SECONDS each (tests/fuzz/run.sh builds build-fuzz/ first).
fuzz: setup
	WERROR=$(WERROR) JOBS=$(JOBS) ./tests/fuzz/run.sh $(FUZZ_SECONDS)

tsan: setup
	$(CONFIGURE_TSAN)
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_concurrency_test
	$(RUN_TSAN)

# libtessera-shim.so's tests under AddressSanitizer (+UBSan, own build folder) and ThreadSanitizer
# (the tsan target's build folder).
shim-sanitize: setup
	$(CONFIGURE_ASAN)
	cmake --build build-shim-asan -j $(JOBS) --target tessera_shim_test
	$(RUN_SHIM_ASAN)
	$(CONFIGURE_TSAN)
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_shim_test
	$(RUN_SHIM_TSAN)

bench: configure
	cmake --build $(BUILD) -j $(JOBS) --target all benchmarks
	./bench/run.sh

# The full reproduction of the FGD paper's numbers (17 lists x 6 policies x 10 seeds).
reproduce: build
	./$(BUILD)/tessera simulate --all-lists --policies artifact --seeds 42-51 --check \
	  --json out/reproduce.json --html out/reproduce.html

clean:
	rm -rf $(BUILD) $(BUILD)-tsan build-fuzz build-shim-asan build-shim-tsan out
