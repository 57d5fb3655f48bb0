# tessera: the two Quick-start commands are `make demo` and `make test` (each sets up, builds
# and runs). Everything else is here for developers.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
# CI (CI=true) builds with warnings as errors; so does `make test WERROR=ON`.
WERROR ?= $(if $(filter true,$(CI)),ON,OFF)
override CMAKE_FLAGS += -DTESSERA_WERROR=$(WERROR)

.PHONY: setup build demo simulate test unit fuzz tsan shim-sanitize bench reproduce clean deb

setup:
	./scripts/setup

build: setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the platform on one machine (tessera serve on SQLite in a temporary folder, two
# node agents with fake GPUs, tenants, a mix of work run under the shim); it stops what it started.
demo: build
	./scripts/demo_platform.sh $(BUILD)

# The trace simulator: every placement policy on the bundled Alibaba default trace, seeds 42-51.
simulate: build
	./$(BUILD)/tessera simulate

# The fuzzers for a short while, the concurrent parts under ThreadSanitizer, then every unit,
# contract and CLI test (ctest's summary is the last thing printed).
test: build
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory tsan
	$(MAKE) --no-print-directory shim-sanitize
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The Debian package (cmake/TesseraInstall.cmake): $(BUILD)/tessera_<version>_<arch>.deb.
deb: build
	cd $(BUILD) && cpack -G DEB

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

FUZZ_SECONDS ?= 15
fuzz: setup
	WERROR=$(WERROR) ./tests/fuzz/run.sh $(FUZZ_SECONDS)

tsan: setup
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=thread \
	  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_WERROR=$(WERROR) >/dev/null
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_sim_test
	TSAN_OPTIONS=halt_on_error=1 ./$(BUILD)-tsan/tests/tessera_sim_test --gtest_filter='*Sweep*:*Parallel*'
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_node_test
	TSAN_OPTIONS=halt_on_error=1 ./$(BUILD)-tsan/tests/tessera_node_test --gtest_filter='*Threads*'
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_store_test
	TSAN_OPTIONS=halt_on_error=1 ./$(BUILD)-tsan/tests/tessera_store_test --gtest_filter='*Concurrent*/Sqlite'
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_daemon_test
	TSAN_OPTIONS=halt_on_error=1 ./$(BUILD)-tsan/tests/tessera_daemon_test

# libtessera-shim.so's tests under AddressSanitizer (+UBSan, own build folder) and ThreadSanitizer
# (the tsan target's build folder). The probe processes get the sanitizer runtime preloaded before the shim; the kill -9
# stress runs SHIM_SANITIZE_KILLS kills instead of 1000 to keep this to a couple of minutes.
SHIM_SANITIZE_KILLS ?= 200
shim-sanitize: setup
	cmake -S . -B build-shim-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=address,undefined \
	  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_WERROR=$(WERROR) >/dev/null
	cmake --build build-shim-asan -j $(JOBS) --target tessera_shim_test
	TESSERA_SHIM_TEST_KILLS=$(SHIM_SANITIZE_KILLS) UBSAN_OPTIONS=halt_on_error=1 \
	  ./build-shim-asan/tests/tessera_shim_test
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=thread \
	  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_WERROR=$(WERROR) >/dev/null
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tessera_shim_test
	TESSERA_SHIM_TEST_KILLS=$(SHIM_SANITIZE_KILLS) TSAN_OPTIONS=halt_on_error=1 \
	  ./$(BUILD)-tsan/tests/tessera_shim_test

bench: build
	./bench/run.sh

# The full reproduction of the FGD paper's numbers (17 lists x 6 policies x 10 seeds).
reproduce: build
	./$(BUILD)/tessera simulate --all-lists --policies artifact --seeds 42-51 --check \
	  --json out/reproduce.json --html out/reproduce.html

clean:
	rm -rf $(BUILD) $(BUILD)-tsan build-fuzz build-shim-asan build-shim-tsan out
