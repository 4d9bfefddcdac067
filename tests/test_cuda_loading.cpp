// The CUDA backend is a library loaded on first use (devices/cuda_plugin.h): a CPU run must
// not map the CUDA runtime, cuBLAS or cuDNN, and a backend that cannot be loaded is one
// clear message.
#include <catch2/catch.hpp>
#include <link.h>

#include <string>
#include <vector>

#include "apps/environment.h"
#include "apps/train_config.h"
#include "autograd/ops.h"
#include "cli_support.h"
#include "devices/registry.h"
#include "layers/zoo.h"

using namespace nnlab;
using nnlab_test::run_cli;
using nnlab_test::run_shell;

namespace {

// Every shared object mapped into this process whose name mentions CUDA.
std::vector<std::string> cuda_libraries_loaded() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        for (const char* mark : {"cuda", "cublas", "cudnn"})
          if (name.find(mark) != std::string::npos) static_cast<std::vector<std::string>*>(out)->push_back(name);
        return 0;
      },
      &found);
  return found;
}

}  // namespace

TEST_CASE("a CPU training step and its run record load no CUDA library", "[cuda-loading]") {
  auto model = make_model("mlp", InputSpec{1, 28, 28, 10}, 1);
  Tensor x = Tensor::full({4, 1, 28, 28}, 0.5f);
  Tensor y = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {4});
  Tensor loss = cross_entropy(model->forward(x), y);
  loss.backward();
  TrainConfig config;
  const nlohmann::json env = environment_record(config, Device::cpu());
  CHECK_FALSE(env["gpu"]["probed"].get<bool>());
  CHECK_FALSE(cuda_loaded());
  CHECK(cuda_libraries_loaded().empty());
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
