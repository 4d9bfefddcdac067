// Data parallelism on CUDA tensors (docs/distributed.md): 2 ranks on one CUDA device (the GPU,
// or the CUDA simulator) stage their gradients through host memory for MPI, and match one
// process on that device. Built where MPI is (tests/CMakeLists.txt).
#include <filesystem>

#include "gpu/gpu_support.h"
#include "mpi_support.h"

#ifdef NNLAB_WITH_MPI
TEST_CASE("gpu: 2 ranks on CUDA tensors (host staging) match one process", "[gpu][cli][distributed]") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const nnlab_test::TempDir dir("nnlab_gpu_mpi");
  const std::string args = "--model mlp --device cuda --epochs 1 --max-steps 10 --seed 4 --batch 64 --metrics-every 1";
  const nnlab_test::CliResult one = nnlab_test::run_cli("train --threads 1 " + args + " --metrics " +
                                                        (dir / "one.jsonl") + " --checkpoint-dir " + (dir / "one"));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const nnlab_test::CliResult two = nnlab_test::mpi_train(2, args + " --metrics " + (dir / "two.jsonl") +
                                                                 " --checkpoint-dir " + (dir / "two"));
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(two.output.find("CUDA gradients are staged through it") != std::string::npos);
  const std::vector<double> a = nnlab_test::step_losses(dir / "one.jsonl"), b = nnlab_test::step_losses(dir / "two.jsonl");
  REQUIRE(a.size() == 10);
  REQUIRE(b.size() == 10);
  CHECK(nnlab_test::relative_difference(b[0], a[0]) < 1e-6);
  CHECK(nnlab_test::relative_l2(dir / "two/last.safetensors", dir / "one/last.safetensors") < 1e-5);
}
#endif
