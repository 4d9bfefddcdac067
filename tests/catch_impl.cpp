// Catch2's own code, compiled once for both test executables (nnlab_tests and
// nnlab_gpu_tests), each of which has its own main(). The single header holds a whole test
// framework: compiling it is 16-26 s of g++ (more under the sanitizers), where a test file
// that only uses it takes about 1 s more for it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

int run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
