// Data parallelism on CUDA tensors (docs/distributed.md): 2 ranks with --device cuda (the GPU,
// or the CUDA simulator) match one process on that device, whichever path sums the gradients:
// NCCL where the CUDA backend has it and the ranks have a GPU each, host staging for MPI
// otherwise (the simulator, or 2 ranks sharing one GPU). Built where MPI is (tests/CMakeLists.txt).
#include <filesystem>

#include "devices/nccl_comm.h"
#include "gpu/gpu_support.h"
#include "mpi_support.h"

#ifdef NNLAB_WITH_MPI
namespace {
// The 2-rank run of `args` against the one-process run `one` wrote: first loss and weights.
// Returns what the run printed.
std::string require_matches_one_process(const nnlab_test::TempDir& dir, const std::string& name,
                                        const std::string& args) {
  const nnlab_test::CliResult two = nnlab_test::mpi_train(2, args + " --metrics " + (dir / (name + ".jsonl")) +
                                                                 " --checkpoint-dir " + (dir / name));
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  const std::vector<double> a = nnlab_test::step_losses(dir / "one.jsonl"),
                            b = nnlab_test::step_losses(dir / (name + ".jsonl"));
  REQUIRE(a.size() == 10);
  REQUIRE(b.size() == 10);
  CHECK(nnlab_test::relative_difference(b[0], a[0]) < 1e-6);
  CHECK(nnlab_test::relative_l2(dir / (name + "/last.safetensors"), dir / "one/last.safetensors") < 1e-5);
  return two.output;
}
}  // namespace

TEST_CASE("gpu: 2 ranks on CUDA tensors match one process, on the all-reduce path auto chooses",
          "[gpu][cli][distributed]") {
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

  // What auto must choose here: NCCL only with NCCL built in and a GPU per rank.
  const std::string missing = nnlab::nccl_unavailable_reason();
  const bool gpu_each = nnlab::cuda_status().device_count >= 2;
  const std::string staged = "MPI on host memory (CUDA gradients are staged through it): ";
  const bool nccl = missing.empty() && gpu_each;
  const std::string expected =
      nccl ? "; NCCL 2." : staged + (missing.empty() ? "2 ranks share one GPU" : "rank 0: " + missing);
  CHECK_THAT(require_matches_one_process(dir, "auto", args), Catch::Contains(expected));
  // Where auto took NCCL, the host path is still there when asked for.
  if (nccl)
    CHECK_THAT(require_matches_one_process(dir, "mpi", args + " --allreduce-backend mpi"),
               Catch::Contains(staged + "--allreduce-backend mpi"));
}
#endif
