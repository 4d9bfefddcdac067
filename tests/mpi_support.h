// Shared by the data-parallel tests (test_distributed*.cpp): start `nnlab train` under mpirun
// and compare what runs with different numbers of ranks wrote.
#pragma once
#ifdef NNLAB_WITH_MPI
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_support.h"
#include "core/serialization.h"

namespace nnlab_test {

// The mpirun prefix for `ranks` processes. CI runs as root, which Open MPI refuses unless told;
// --oversubscribe: more ranks than cores is fine for a test; --bind-to none and yielding
// while idle: the ranks share two busy cores with the rest of the build, and a rank spinning
// in MPI would starve the one it waits for; no single-copy shared memory (CMA), which
// containers often forbid. Under AddressSanitizer the ranks skip the leak check at exit: Open
// MPI keeps its start-up allocations to the end, in components it has unloaded by then, so
// no suppression can name them (the one-process runs keep the check).
inline std::string mpirun_prefix() {
  std::string leaks;
#if defined(__SANITIZE_ADDRESS__)
  leaks = "ASAN_OPTIONS=\"${ASAN_OPTIONS}:detect_leaks=0\" ";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  leaks = "ASAN_OPTIONS=\"${ASAN_OPTIONS}:detect_leaks=0\" ";
#endif
#endif
  return leaks + "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + NNLAB_MPIEXEC +
         " --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none ";
}

// `nnlab train ARGS` on `ranks` ranks (one thread each), stdout and stderr together. `env`:
// "NAME=value " assignments the ranks inherit.
inline CliResult mpi_train(int ranks, const std::string& args, const std::string& env = "") {
  return run_shell(env + mpirun_prefix() + "-np " + std::to_string(ranks) + " " + NNLAB_CLI_PATH +
                   " train --threads 1 " + args);
}

// ‖a − b‖₂ / ‖b‖₂ over every float32 tensor of two checkpoints (weights and optimizer state).
inline double relative_l2(const std::string& a_path, const std::string& b_path) {
  const nnlab::SafetensorsFile a = nnlab::load_safetensors(a_path), b = nnlab::load_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  double diff = 0, norm = 0;
  for (const auto& [name, t] : a.tensors) {
    if (t.dtype() != nnlab::DType::Float32) continue;
    const nnlab::Tensor& u = b.at(name);
    REQUIRE(u.numel() == t.numel());
    const float* x = t.data<float>();
    const float* y = u.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(y[i]) * y[i];
    }
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

inline double relative_difference(double a, double b) { return std::abs(a - b) / std::abs(b); }

// The process whose environment holds both `tag` and OMPI_COMM_WORLD_RANK=rank, or -1.
inline pid_t find_rank(const std::string& tag, int rank) {
  namespace fs = std::filesystem;
  const std::string want_rank = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = read_text(entry.path() / "environ");
    for (char& c : env)
      if (c == '\0') c = '\n';
    env = "\n" + env;
    if (env.find("\n" + tag + "\n") != std::string::npos && env.find("\n" + want_rank + "\n") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

// How a 2-rank job ended after its rank 1 was killed with SIGKILL (kill_rank_one).
struct KilledJob {
  std::string output;     // what the job printed
  int status = 0;         // waitpid's status of the job
  double seconds = 0;     // from the kill to the job's end
  bool rank0_outlived = false;
};

// Starts `mpirun -np 2 nnlab train --threads 1 ARGS --checkpoint-dir DIR/ckpt > DIR/log.txt`,
// waits for DIR/ckpt/last.safetensors (ARGS must ask for an early checkpoint), kills rank 1
// the hard way and waits up to 30 s for the job to end. A job that outlives that is ended
// (rank 0 and mpirun) and the test fails.
inline KilledJob kill_rank_one(const std::string& args, const std::string& dir) {
  using Clock = std::chrono::steady_clock;
  namespace fs = std::filesystem;
  const std::string tag = "NNLAB_TEST_JOB=kill-" + std::to_string(getpid());
  const std::string ckpt = dir + "/ckpt/last.safetensors", log = dir + "/log.txt";
  const std::string command = tag + " " + mpirun_prefix() + "-x NNLAB_TEST_JOB -np 2 " + NNLAB_CLI_PATH +
                              " train --threads 1 " + args + " --checkpoint-dir " + dir + "/ckpt > " + log + " 2>&1";
  const pid_t shell = fork();
  REQUIRE(shell >= 0);
  if (shell == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto start = Clock::now();
  while (!fs::exists(ckpt) && Clock::now() - start < std::chrono::seconds(240))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const pid_t victim = find_rank(tag, 1);
  if (!fs::exists(ckpt) || victim < 0) {
    kill(shell, SIGKILL);
    waitpid(shell, nullptr, 0);
    FAIL("no checkpoint or no rank 1 to kill:\n" << read_text(log));
  }
  REQUIRE(kill(victim, SIGKILL) == 0);
  const auto killed = Clock::now();
  KilledJob job;
  pid_t done = 0;
  while ((done = waitpid(shell, &job.status, WNOHANG)) == 0 && Clock::now() - killed < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  job.seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  job.output = read_text(log);
  INFO(job.output);
  if (done == 0) {
    if (const pid_t rank0 = find_rank(tag, 0); rank0 > 0) kill(rank0, SIGKILL);
    kill(shell, SIGKILL);
    waitpid(shell, nullptr, 0);
    FAIL("the job still ran 30 s after rank 1 was killed");
  }
  job.rank0_outlived = find_rank(tag, 0) >= 0;
  return job;
}

// The checks every killed job must pass: it ended within seconds, failed, named rank 1 and
// its signal, and left no rank behind.
inline void require_ended_naming_rank_one(const KilledJob& job) {
  INFO(job.output);
  INFO("ended " << job.seconds << " s after the kill");
  CHECK(job.seconds < 10);
  CHECK(WIFEXITED(job.status));
  CHECK(WEXITSTATUS(job.status) != 0);
  CHECK(job.output.find("rank 1") != std::string::npos);
  CHECK(job.output.find("signal 9") != std::string::npos);
  CHECK_FALSE(job.rank0_outlived);
}

}  // namespace nnlab_test
#endif
