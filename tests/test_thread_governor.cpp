// The thread governor (apps/thread_governor.h) fed made-up step times: an idle
// machine where 2 threads are faster, a busy one where every barrier waits a time slice,
// and load that comes and goes. Tests the mechanism, never a timing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli_support.h"
#include "apps/thread_governor.h"
#include "devices/cpu/threads.h"

using namespace nnlab;

namespace {

// Step time of the model machine: 1 ms with 1 thread, 0.6 ms with 2 on an idle machine; with
// the cores taken 1.5 ms with 1 thread and 70 ms with 2 (a time slice at the barriers).
double step_time(int threads, bool busy) {
  if (threads == 1) return busy ? 1.5e-3 : 1.0e-3;
  return busy ? 70e-3 : 0.6e-3;
}

struct Run {
  int64_t steps_at_one = 0, steps_at_max = 0;
  double seconds = 0;
};

// `steps` steps on a machine that is busy when busy(step) says so.
template <typename Busy>
Run run(ThreadGovernor& g, int64_t steps, Busy busy, int64_t first = 0) {
  Run r;
  int threads = g.threads();
  for (int64_t s = first; s < first + steps; ++s) {
    const double t = step_time(threads, busy(s));
    r.seconds += t;
    (threads == 1 ? r.steps_at_one : r.steps_at_max) += 1;
    threads = g.after_step(t);
  }
  return r;
}

}  // namespace

TEST_CASE("thread governor: on an idle machine it keeps all threads and probes ever more rarely", "[governor]") {
  ThreadGovernor g(ThreadGovernorOptions{});
  const Run r = run(g, 20000, [](int64_t) { return false; });
  CHECK(g.threads() == 2);
  CHECK(g.changes() == 0);
  // Probes at steps ~2, 1036, 3085, 7182, 15375: each costs 5 steps at 1 thread, and the
  // two warm-up steps run at 1 thread.
  CHECK(g.probes() <= 6);
  CHECK(r.steps_at_one <= 2 + 5 * g.probes());
  // Within 1% of always using 2 threads.
  CHECK(r.seconds <= 1.01 * 20000 * step_time(2, false));
  CHECK(g.last_decision().find("unchanged") != std::string::npos);
}

TEST_CASE("thread governor: with the cores taken it backs off to 1 thread after one slow step", "[governor]") {
  ThreadGovernor g(ThreadGovernorOptions{});
  const Run r = run(g, 5000, [](int64_t) { return true; });
  CHECK(g.threads() == 1);
  CHECK(g.last_decision().find("other programs are using the cores") != std::string::npos);
  // One slow step per probe, none in the warm-up.
  CHECK(r.steps_at_max <= g.probes());
  // Never worse than 1 thread by more than 20% (the bound), here far within it.
  const double one_thread_only = 5000 * step_time(1, true);
  CHECK(r.seconds <= 1.2 * one_thread_only + 2 * step_time(2, true));
}

TEST_CASE("thread governor: load that comes is noticed within a few steps, load that goes at the next probe",
          "[governor]") {
  ThreadGovernor g(ThreadGovernorOptions{});
  run(g, 3000, [](int64_t) { return false; });
  REQUIRE(g.threads() == 2);
  // The cores become busy: the median of the last 4 steps doubles, a probe follows at once.
  int64_t slow_steps = 0;
  int threads = g.threads();
  for (int i = 0; i < 20 && threads == 2; ++i) {
    threads = g.after_step(step_time(threads, true));
    ++slow_steps;
  }
  CHECK(threads == 1);
  CHECK(slow_steps <= 4);
  run(g, 100, [](int64_t) { return true; });
  CHECK(g.threads() == 1);
  // The load ends: steps at 1 thread get faster, which is no alarm, so the next probe (after
  // the hold) finds 2 threads faster again.
  run(g, 1100, [](int64_t) { return false; });
  CHECK(g.threads() == 2);
  CHECK(g.changes() == 2);
}

TEST_CASE("thread governor: the ladder of counts a probe climbs", "[governor]") {
  CHECK(ThreadGovernor::ladder(2) == std::vector<int>{1, 2});
  CHECK(ThreadGovernor::ladder(3) == std::vector<int>{1, 2, 3});
  CHECK(ThreadGovernor::ladder(12) == std::vector<int>{1, 2, 4, 8, 12});
  CHECK(ThreadGovernor::ladder(16) == std::vector<int>{1, 2, 4, 8, 16});
  // 12 hardware threads on 6 cores: one thread a core is a rung of its own.
  CHECK(ThreadGovernor::ladder(12, 6) == std::vector<int>{1, 2, 4, 6, 8, 12});
  CHECK(ThreadGovernor::ladder(16, 8) == std::vector<int>{1, 2, 4, 8, 16});
  CHECK(ThreadGovernor::ladder(2, 2) == std::vector<int>{1, 2});
}

TEST_CASE("physical cores: hardware threads of one core count once", "[governor]") {
  const nnlab_test::TempDir dir("nnlab_topology");
  // CPUs 0-3: package 0, cores 0 and 1, two threads each; CPU 4 has no topology files.
  const int core_of[4] = {0, 1, 0, 1};
  for (int cpu = 0; cpu < 4; ++cpu) {
    const std::string topology = dir / ("cpu" + std::to_string(cpu) + "/topology");
    std::filesystem::create_directories(topology);
    std::ofstream(topology + "/physical_package_id") << "0\n";
    std::ofstream(topology + "/core_id") << core_of[cpu] << "\n";
  }
  CHECK(physical_cores_of({0, 1, 2, 3}, dir.path.string()) == 2);
  CHECK(physical_cores_of({0, 2}, dir.path.string()) == 1);  // taskset to the two threads of core 0
  CHECK(physical_cores_of({0, 1, 4}, dir.path.string()) == 3);
  CHECK(physical_cores_of({}, dir.path.string()) == 0);
  CHECK(cpu_physical_cores() >= 1);
  CHECK(cpu_physical_cores() <= cpu_cores());
}

namespace {

// 16 cores, step times in ms by thread count; the steps taken at each count.
std::map<int, int64_t> climb(ThreadGovernor& g, const std::map<int, double>& ms, int64_t steps) {
  std::map<int, int64_t> taken;
  int threads = g.threads();
  for (int64_t s = 0; s < steps; ++s) {
    ++taken[threads];
    threads = g.after_step(1e-3 * ms.at(threads));
  }
  return taken;
}

ThreadGovernorOptions sixteen_cores() {
  ThreadGovernorOptions o;
  o.max_threads = 16;
  return o;
}

}  // namespace

TEST_CASE("thread governor: on 16 cores it climbs 1, 2, 4, 8, 16 and keeps the fastest", "[governor]") {
  // A step whose speed-up flattens at 8 threads and falls at 16 (barriers, shared caches).
  ThreadGovernor g(sixteen_cores());
  const std::map<int, double> ms{{1, 1.0}, {2, 0.52}, {4, 0.28}, {8, 0.17}, {16, 0.2}};
  const std::map<int, int64_t> taken = climb(g, ms, 3000);
  CHECK(g.threads() == 8);
  CHECK(g.last_decision() ==
        "8 threads: a step took 1.00 ms with 1 thread, 0.52 ms with 2, 0.28 ms with 4, 0.17 ms with 8 and 0.20 ms with "
        "16 threads; unchanged");
  CHECK(taken.at(8) > 2800);
}

TEST_CASE("thread governor: the climb ends at the first count that is no faster", "[governor]") {
  ThreadGovernor g(sixteen_cores());
  const std::map<int, double> ms{{1, 1.0}, {2, 0.6}, {4, 0.7}, {8, 0.2}, {16, 0.1}};
  const std::map<int, int64_t> taken = climb(g, ms, 500);
  CHECK(g.threads() == 2);
  CHECK(taken.count(8) == 0);
  CHECK(taken.count(16) == 0);
  CHECK(g.last_decision() == "2 threads: a step took 1.00 ms with 1 thread, 0.60 ms with 2 and 0.70 ms with 4 threads");
}

TEST_CASE("thread governor: a rung slowed by other programs costs one step", "[governor]") {
  // Two cores free of sixteen: 4 threads wait a time slice at every barrier.
  ThreadGovernor g(sixteen_cores());
  const std::map<int, double> ms{{1, 1.0}, {2, 0.6}, {4, 50}, {8, 80}, {16, 90}};
  const std::map<int, int64_t> taken = climb(g, ms, 500);
  CHECK(g.threads() == 2);
  CHECK(taken.at(4) == 1);
  CHECK(taken.count(8) == 0);
  CHECK_THAT(g.last_decision(), Catch::Contains("other programs are using the cores"));
}

TEST_CASE("thread governor: refuses fewer than 2 threads to choose from", "[governor]") {
  ThreadGovernorOptions o;
  o.max_threads = 1;
  CHECK_THROWS_WITH(ThreadGovernor(o), Catch::Contains("at least 2 threads"));
}

// Issue 38: the thread count respects the CPUs the process may use: a cgroup's CPU quota
// (containers started with --cpus) as well as the affinity mask (taskset).
TEST_CASE("cpu_cores reads a cgroup's CPU quota, rounded up to whole CPUs", "[governor]") {
  namespace fs = std::filesystem;
  const fs::path file = fs::temp_directory_path() / ("nnlab_cpu_max_" + std::to_string(::getpid()));
  const auto limit = [&](const std::string& text) {
    std::ofstream(file) << text;
    return cgroup_cpu_limit(file.string());
  };
  CHECK(limit("200000 100000\n") == 2);
  CHECK(limit("150000 100000\n") == 2);  // 1.5 CPUs of time: two may run
  CHECK(limit("50000 100000\n") == 1);
  CHECK(limit("max 100000\n") == 0);  // no quota
  CHECK(limit("garbage\n") == 0);
  fs::remove(file);
  CHECK(cgroup_cpu_limit(file.string()) == 0);  // no such file: no quota
}

TEST_CASE("nnlab devices counts only the CPUs taskset leaves it", "[governor][cli]") {
  if (std::system("command -v taskset >/dev/null 2>&1") != 0 || cpu_cores() < 2) {
    WARN("skipped: needs taskset and two CPUs");
    return;
  }
  const nnlab_test::CliResult r = nnlab_test::run_shell("taskset -c 0 " + std::string(NNLAB_CLI_PATH) + " devices");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("1 cores, 1 threads") || Catch::Contains("1 core, 1 thread"));
}
