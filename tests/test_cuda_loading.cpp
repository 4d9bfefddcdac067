// The CUDA backend is a library loaded on first use (devices/cuda_plugin.h): a CPU run must
// not map the CUDA runtime, cuBLAS or cuDNN, and a backend that cannot be loaded is one
// clear message.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "devices/registry.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::run_cli;
using nnlab_test::run_shell;
using nnlab_test::TempDir;

namespace {

// The libraries the dynamic loader opened while running `nnlab ARGS` (LD_DEBUG=files names
// each, dlopen included) whose names mention CUDA. A fresh process: in one test process,
// earlier tests may have loaded the backend already.
std::vector<std::string> cuda_libraries_opened(const std::string& env, const std::string& args) {
  const auto r = run_shell(env + " LD_DEBUG=files " + std::string(NNLAB_CLI_PATH) + " " + args);
  std::vector<std::string> found;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("file=") == std::string::npos) continue;
    for (const char* mark : {"cuda", "cublas", "cudnn"})
      if (line.find(mark) != std::string::npos) {
        found.push_back(line);
        break;
      }
  }
  return found;
}

}  // namespace

TEST_CASE("a CPU training run and its run record load no CUDA library", "[cuda-loading][cli]") {
  TempDir dir;
  const std::string metrics = (dir.path / "run.jsonl").string();
  const std::vector<std::string> opened =
      cuda_libraries_opened("", "train --model mlp --device cpu --max-steps 2 --threads 1 --metrics " + metrics);
  INFO("opened: " << (opened.empty() ? std::string("none") : opened.front()));
  CHECK(opened.empty());
  std::ifstream in(metrics);
  std::string first;
  REQUIRE(std::getline(in, first));
  const auto run = nlohmann::json::parse(first);
  CHECK(run.at("environment").at("gpu").at("probed") == false);
  // The check sees a loaded backend: asked for by path, `nnlab devices` loads it.
  if (built_with_cuda()) {
    const std::string cli = NNLAB_CLI_PATH, library = cli.substr(0, cli.rfind('/')) + "/libnnlab_cuda.so";
    CHECK_FALSE(cuda_libraries_opened("NNLAB_CUDA_LIBRARY=" + library, "devices").empty());
  }
}

TEST_CASE("a CUDA backend that cannot be loaded is one clear message", "[cuda-loading][cli]") {
  if (!built_with_cuda()) {
    const auto r = run_cli("train --device cuda --max-steps 1");
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("built without CUDA") != std::string::npos);
    return;
  }
  const auto r = run_shell("NNLAB_CUDA_LIBRARY=/nonexistent/libnnlab_cuda.so " + std::string(NNLAB_CLI_PATH) +
                           " train --device cuda --max-steps 1");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("the CUDA backend /nonexistent/libnnlab_cuda.so could not be loaded") != std::string::npos);
  CHECK(r.output.find("NNLAB_CUDA_LIBRARY") != std::string::npos);
  // A file that is not nnlab's backend is named as such.
  const auto wrong = run_shell("NNLAB_CUDA_LIBRARY=libz.so.1 " + std::string(NNLAB_CLI_PATH) + " devices");
  CHECK(wrong.output.find("is not nnlab's CUDA backend library") != std::string::npos);
}
