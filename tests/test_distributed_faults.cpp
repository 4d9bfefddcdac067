// Data-parallel runs that stop and start again (docs/distributed.md): a 2-rank checkpoint
// resumes on 2 ranks bit for bit and on 1 rank up to summation order; a rank killed with
// SIGKILL ends the whole job within seconds with a message naming it, and the last checkpoint
// resumes; ranks started with different options are refused at start-up with one message.
#include <catch2/catch.hpp>

#ifdef NNLAB_WITH_MPI
#include <filesystem>
#include <string>

#include "cli_support.h"
#include "core/serialization.h"
#include "mpi_support.h"

namespace fs = std::filesystem;
using nnlab_test::CliResult;
using nnlab_test::kFashion;
using nnlab_test::TempDir;

namespace {
}  // namespace

TEST_CASE("distributed: a 2-rank checkpoint resumes bit for bit on 2 ranks, and on 1 rank", "[distributed][mpi]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const TempDir dir("nnlab_mpi_resume");
  const std::string common = "--model mlp --epochs 1 --batch 64 --seed 8 ";
  const CliResult full = nnlab_test::mpi_train(2, common + "--max-steps 20 --checkpoint-dir " + (dir / "full"));
  INFO(full.output);
  REQUIRE(full.exit_code == 0);
  const CliResult half = nnlab_test::mpi_train(2, common + "--max-steps 10 --checkpoint-dir " + (dir / "half"));
  INFO(half.output);
  REQUIRE(half.exit_code == 0);
  const std::string half_ckpt = dir / "half/last.safetensors";

  const CliResult two = nnlab_test::mpi_train(2, common + "--max-steps 20 --resume " + half_ckpt +
                                                     " --checkpoint-dir " + (dir / "two"));
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(two.output.find("resuming from") != std::string::npos);
  nnlab_test::expect_same_tensors(dir / "full/last.safetensors", dir / "two/last.safetensors");

  const CliResult one = nnlab_test::run_cli("train --threads 1 " + common + "--max-steps 20 --resume " + half_ckpt +
                                            " --checkpoint-dir " + (dir / "one"));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  CHECK(nnlab_test::relative_l2(dir / "one/last.safetensors", dir / "full/last.safetensors") < 1e-5);
}

TEST_CASE("distributed: a killed rank ends the job within seconds, naming it, and the checkpoint resumes",
          "[distributed][mpi]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const TempDir dir("nnlab_mpi_kill");
  const std::string ckpt = dir / "ckpt/last.safetensors";
  nnlab_test::require_ended_naming_rank_one(
      nnlab_test::kill_rank_one("--model mlp --epochs 1 --batch 64 --seed 9 --checkpoint-every 20", dir.path));

  // The checkpoint is whole and the run continues from it, here on one process.
  const nnlab::SafetensorsFile saved = nnlab::load_safetensors(ckpt);
  CHECK(!saved.tensors.empty());
  const CliResult resumed = nnlab_test::run_cli("train --threads 1 --model mlp --epochs 1 --batch 64 --seed 9 "
                                                "--max-steps 300 --resume " + ckpt);
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.output.find("resuming from") != std::string::npos);
}

TEST_CASE("distributed: ranks started with different options are refused at start-up with one message",
          "[distributed][mpi]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const std::string train = std::string(NNLAB_CLI_PATH) + " train --threads 1 --max-steps 1 --batch 64 ";
  // MPMD: rank 0 and rank 1 are started with their own command lines.
  const CliResult r = nnlab_test::run_shell(nnlab_test::mpirun_prefix() + "-np 1 " + train + "--seed 1 : -np 1 " +
                                            train + "--seed 2");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("rank 1 differs from rank 0 in seed 2 vs 1") != std::string::npos);
  size_t messages = 0;
  for (size_t at = r.output.find("nnlab: error"); at != std::string::npos; at = r.output.find("nnlab: error", at + 1))
    ++messages;
  CHECK(messages == 1);
  CHECK(r.output.find("epoch 1/") == std::string::npos);  // no training started

  const CliResult model = nnlab_test::run_shell(nnlab_test::mpirun_prefix() + "-np 1 " + train + "--model mlp : -np 1 " +
                                                train + "--model lenet5");
  INFO(model.output);
  CHECK(model.exit_code != 0);
  CHECK(model.output.find("rank 1 differs from rank 0 in model \"lenet5\" vs \"mlp\"") != std::string::npos);
}

TEST_CASE("distributed: --allreduce-backend nccl where NCCL cannot work, or differing between ranks, is one error",
          "[distributed][mpi]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const auto count_errors = [](const std::string& output) {
    size_t messages = 0;
    for (size_t at = output.find("nnlab: error"); at != std::string::npos; at = output.find("nnlab: error", at + 1))
      ++messages;
    return messages;
  };
  // NCCL sums CUDA memory: on the CPU a forced nccl is refused (without loading the CUDA backend).
  const CliResult cpu = nnlab_test::mpi_train(2, "--device cpu --max-steps 1 --batch 64 --allreduce-backend nccl");
  INFO(cpu.output);
  CHECK(cpu.exit_code != 0);
  CHECK(cpu.output.find("nnlab: error: --allreduce-backend nccl cannot be used: NCCL sums CUDA memory, and this "
                        "run's gradients are on the CPU") != std::string::npos);
  CHECK(count_errors(cpu.output) == 1);
  CHECK(cpu.output.find("epoch 1/") == std::string::npos);

  // Ranks that disagree are refused before any of them starts NCCL (which would wait forever).
  const std::string train = std::string(NNLAB_CLI_PATH) + " train --threads 1 --max-steps 1 --batch 64 ";
  const CliResult differ = nnlab_test::run_shell(nnlab_test::mpirun_prefix() + "-np 1 " + train +
                                                 "--allreduce-backend auto : -np 1 " + train + "--allreduce-backend mpi");
  INFO(differ.output);
  CHECK(differ.exit_code != 0);
  CHECK(differ.output.find("rank 1 differs from rank 0 in allreduce_backend \"mpi\" vs \"auto\"") != std::string::npos);
  CHECK(count_errors(differ.output) == 1);
}

TEST_CASE("distributed: a bad option value is one message from rank 0, not one per rank", "[distributed][mpi]") {
  const auto count = [](const std::string& output, const std::string& what) {
    size_t n = 0;
    for (size_t at = output.find(what); at != std::string::npos; at = output.find(what, at + 1)) ++n;
    return n;
  };
  // A value nnlab checks: every rank agrees on the failure, rank 0 prints it, no MPI_Abort.
  const CliResult bad = nnlab_test::mpi_train(2, "--max-steps 1 --allreduce-backend foo");
  INFO(bad.output);
  CHECK(bad.exit_code != 0);
  CHECK(count(bad.output, "nnlab: error: --allreduce-backend must be auto, nccl or mpi, got 'foo'") == 1);
  CHECK(count(bad.output, "nnlab: error") == 1);
  CHECK(bad.output.find("MPI_Abort") == std::string::npos);
  // Only one rank started with it: that rank is named, still in one message.
  const std::string train = std::string(NNLAB_CLI_PATH) + " train --threads 1 --max-steps 1 ";
  const CliResult one = nnlab_test::run_shell(nnlab_test::mpirun_prefix() + "-np 1 " + train + "--math fp32 : -np 1 " +
                                              train + "--math tf32");
  INFO(one.output);
  CHECK(one.exit_code != 0);
  CHECK(count(one.output, "nnlab: error: rank 1: --math tf32 is a format of NVIDIA's tensor cores") == 1);
  CHECK(count(one.output, "nnlab: error") == 1);
  // A value the command line's parser rejects, before MPI starts: rank 0 alone says so.
  const CliResult parse = nnlab_test::mpi_train(2, "--epochs abc");
  INFO(parse.output);
  CHECK(parse.exit_code != 0);
  CHECK(count(parse.output, "--epochs") == 1);
}

#endif
