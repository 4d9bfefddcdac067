// Data parallelism on CUDA tensors (docs/distributed.md): 2 ranks with --device cuda (GPUs, or
// the CUDA simulator) match one process on that device, whichever path sums the gradients:
// NCCL where the CUDA backend has it and the ranks have a GPU each, host staging for MPI
// otherwise. On the simulator the tests' main gives every run 2 simulated devices
// (NNLAB_SIM_DEVICES=2), so rank r trains on cuda:r and the ranks, two processes, sum with the
// simulator's NCCL through shared memory: the multi-GPU path, run without two GPUs. Built
// where MPI is (tests/CMakeLists.txt); scripts/racecheck.sh runs these under ThreadSanitizer.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "devices/nccl_comm.h"
#include "gpu/gpu_support.h"
#include "gpu/sim_trace_support.h"
#include "mpi_support.h"

#ifdef NNLAB_WITH_MPI
namespace {

bool have_fashion_mnist() {
  if (std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) return true;
  WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
  return false;
}

// The mlp on CUDA for `steps` steps of global batch `batch`, a loss per step in the metrics.
std::string mlp_args(int steps, int batch) {
  return "--model mlp --device cuda --epochs 1 --seed 4 --test-images 256 --metrics-every 1 --max-steps " +
         std::to_string(steps) + " --batch " + std::to_string(batch);
}

// Trains `args` in one process (ranks = 1) or under mpirun (with `env`); its metrics and
// checkpoints under dir/name. Returns what it printed.
std::string train(const nnlab_test::TempDir& dir, const std::string& name, int ranks, const std::string& args,
                  const std::string& env = "") {
  const std::string outputs = " --metrics " + (dir / (name + ".jsonl")) + " --checkpoint-dir " + (dir / name);
  const nnlab_test::CliResult r = ranks == 1 ? nnlab_test::run_cli("train --threads 1 " + args + outputs)
                                             : nnlab_test::mpi_train(ranks, args + outputs, env);
  INFO(name << ": " << r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

// The run `name` follows the one-process run `one`: the first loss within 1e-6, every weight
// and optimizer state after the last step within 1e-5 (relative L2; the sums' order differs).
void require_follows(const nnlab_test::TempDir& dir, const std::string& name, const std::string& one, size_t steps) {
  const std::vector<double> a = nnlab_test::step_losses(dir / (one + ".jsonl")),
                            b = nnlab_test::step_losses(dir / (name + ".jsonl"));
  REQUIRE(a.size() == steps);
  REQUIRE(b.size() == steps);
  INFO(name << " against " << one);
  CHECK(nnlab_test::relative_difference(b[0], a[0]) < 1e-6);
  CHECK(nnlab_test::relative_l2(dir / (name + "/last.safetensors"), dir / (one + "/last.safetensors")) < 1e-5);
}

// The epoch record a run wrote into its metrics file.
nlohmann::json epoch_record(const std::string& metrics) {
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "epoch") return j;
  }
  FAIL("no epoch record in " << metrics);
  return {};
}

}  // namespace

TEST_CASE("gpu: 2 ranks on CUDA tensors follow one process, in step and overlap mode", "[gpu][cli][distributed]") {
  if (!have_fashion_mnist()) return;
  const nnlab_test::TempDir dir("nnlab_gpu_mpi");
  const std::string args = mlp_args(50, 32);
  train(dir, "one", 1, args);

  // What auto must choose here: NCCL only with NCCL built in and a GPU per rank.
  const std::string missing = nnlab::nccl_unavailable_reason();
  const bool gpu_each = nnlab::cuda_status().device_count >= 2;
  const std::string staged = "MPI on host memory (CUDA gradients are staged through it): ";
  const bool nccl = missing.empty() && gpu_each;
  const std::string expected =
      nccl ? "; NCCL 2." : staged + (missing.empty() ? "2 ranks share one GPU" : "rank 0: " + missing);
  // On the simulator each rank also writes its timeline (NNLAB_SIM_TRACE; a GPU ignores it).
  const auto traced = [&](const std::string& name) { return "NNLAB_SIM_TRACE=" + (dir / ("trace-" + name)) + ".%p.json "; };
  CHECK_THAT(train(dir, "step", 2, args, traced("step")),
             Catch::Contains(expected) && Catch::Contains("reduced once after backward"));
  require_follows(dir, "step", "one", 50);
  // overlap: 2 buckets for the mlp (fc3, fc2 and fc1's bias; fc1's weight), each summed as soon
  // as backward has produced it
  CHECK_THAT(train(dir, "overlap", 2, args + " --allreduce overlap", traced("overlap")),
             Catch::Contains(expected) && Catch::Contains("buckets, each reduced during backward"));
  require_follows(dir, "overlap", "one", 50);
  if (nccl && nnlab::cuda_simulated()) {
    // The timelines show the overlap: in step mode no kernel runs while a sum does (the next
    // step's work waits for the sums' event); in overlap mode each rank sums its first bucket
    // on the second stream while backward computes fc1's gradients on the first.
    for (const char* mode : {"step", "overlap"}) {
      const std::vector<std::string> files = nnlab_test::sim_trace_files(dir.path, "trace-" + std::string(mode) + ".");
      REQUIRE(files.size() == 2);
      for (const std::string& file : files) {
        const nnlab_test::ProcessTrace t = nnlab_test::read_sim_trace(file);
        INFO(file);
        CHECK(t.row_names.size() == 2);  // the backend's stream and the communicator's
        CHECK(nnlab_test::overlaps_within_a_stream(t) == 0);
        if (std::string(mode) == "step")
          CHECK(nnlab_test::nccl_beside_compute(t) == 0);
        else
          CHECK(nnlab_test::nccl_beside_compute(t) > 0);
      }
    }
  }
  if (nccl) {
    // The sums' own device time is recorded (CUDA events on the communicator's stream).
    for (const char* mode : {"step", "overlap"}) {
      const nlohmann::json epoch = epoch_record(dir / (std::string(mode) + ".jsonl"));
      INFO(mode << ": " << epoch.dump());
      CHECK(epoch["allreduce_device_seconds"].get<double>() > 0);
    }
  }
  // Where auto took NCCL, the host path is still there when asked for.
  if (nccl) {
    CHECK_THAT(train(dir, "mpi", 2, args + " --allreduce-backend mpi"), Catch::Contains(staged + "--allreduce-backend mpi"));
    require_follows(dir, "mpi", "one", 50);
  }
}

TEST_CASE("gpu: 2 ranks on CUDA tensors with an uneven batch follow one process", "[gpu][cli][distributed]") {
  if (!have_fashion_mnist()) return;
  const nnlab_test::TempDir dir("nnlab_gpu_mpi_uneven");
  const std::string args = mlp_args(20, 63);  // 32 samples on rank 0, 31 on rank 1
  train(dir, "one", 1, args);
  train(dir, "two", 2, args);
  require_follows(dir, "two", "one", 20);
}

TEST_CASE("gpu: a 2-rank CUDA checkpoint resumes bit for bit on 2 ranks, and on 1 rank", "[gpu][cli][distributed]") {
  if (!have_fashion_mnist()) return;
  const nnlab_test::TempDir dir("nnlab_gpu_mpi_resume");
  train(dir, "full", 2, mlp_args(20, 64));
  train(dir, "half", 2, mlp_args(10, 64));
  const std::string resume = " --resume " + (dir / "half/last.safetensors");
  CHECK_THAT(train(dir, "two", 2, mlp_args(20, 64) + resume), Catch::Contains("resuming from"));
  nnlab_test::expect_same_tensors(dir / "full/last.safetensors", dir / "two/last.safetensors");
  train(dir, "one", 1, mlp_args(20, 64) + resume);
  CHECK(nnlab_test::relative_l2(dir / "one/last.safetensors", dir / "full/last.safetensors") < 1e-5);
}

TEST_CASE("gpu: a killed rank of a CUDA job ends it within seconds, naming it", "[gpu][cli][distributed]") {
  if (!have_fashion_mnist()) return;
  const nnlab_test::TempDir dir("nnlab_gpu_mpi_kill");
  const nnlab_test::KilledJob job = nnlab_test::kill_rank_one(
      "--model mlp --device cuda --epochs 1 --seed 4 --batch 64 --checkpoint-every 5", dir.path);
  nnlab_test::require_ended_naming_rank_one(job);
  CHECK(!nnlab::load_safetensors(dir / "ckpt/last.safetensors").tensors.empty());
}
#else
// A build without MPI started as one of several ranks (mpirun sets OMPI_COMM_WORLD_SIZE) would
// train alone on every rank: it refuses instead. scripts/racecheck.sh's build is the one
// without MPI that CI runs this in.
TEST_CASE("gpu: a build without MPI refuses a CUDA run as one of several ranks", "[gpu][distributed][cli][no_mpi]") {
  const nnlab_test::CliResult r = nnlab_test::run_shell("OMPI_COMM_WORLD_SIZE=2 " + std::string(NNLAB_CLI_PATH) +
                                                        " train --device cuda --model mlp --max-steps 1");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("built without MPI"));
}
#endif
