# The two commands a new user needs; CMake does the work underneath.
#   make demo   configure, build, and run `tcuda info` and the example
#   make test   configure, build, and run every test (GPU tests skip without a GPU)
# BUILD picks the build folder, CMAKE_FLAGS adds configure options, e.g.
#   make test BUILD=build-cpu CMAKE_FLAGS=-DTCUDA_CUDA=OFF
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all demo test clean

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

demo: all
	./$(BUILD)/tools/tcuda info
	./$(BUILD)/examples/tensor_demo

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
