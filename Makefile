# kvroute — top-level entry points. Each target installs and builds what it needs first.
#   make demo   simulated workers behind kvroute, a short comparison against nginx
#   make test   the whole suite (unit, sanitizer unit, wire, integration)
.PHONY: all setup configure build test test-unit test-asan demo bench format clean

BUILD_DIR := build/release

all: build

setup:
	@bash scripts/setup.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt CMakePresets.json | setup
	cmake --preset release >/dev/null

configure: setup
	cmake --preset release >/dev/null

build: configure
	cmake --build --preset release

test: build
	ctest --preset release
	$(MAKE) --no-print-directory test-asan

test-unit: build
	ctest --preset release -L unit

test-asan: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan --target unit_tests
	ctest --preset asan

demo: build
	$(BUILD_DIR)/kvroute demo

bench: build
	$(BUILD_DIR)/kvroute bench --help

format:
	find src microbench tests -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf build
