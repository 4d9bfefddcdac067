#include "devices/cpu/core_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;

// Trips per timed batch, batches per measurement, and the wall-clock bound on the whole
// measurement (a machine whose other programs keep a CPU busy makes each trip wait for a
// scheduler time slice, milliseconds, instead of a cache transfer).
constexpr int kTrips = 20000, kBatches = 5;
constexpr auto kTimeLimit = std::chrono::milliseconds(200);

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// The first two CPUs of the affinity mask, or -1.
std::pair<int, int> first_two_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {-1, -1};
  int found[2] = {-1, -1}, count = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && count < 2; ++cpu)
    if (CPU_ISSET(cpu, &set)) found[count++] = cpu;
  return {found[0], found[1]};
}

}  // namespace

std::optional<double> core_round_trip_ns() {
  // Plain ints, not a structured binding: C++17 lambdas may not capture those (clang refuses).
  const std::pair<int, int> cpus = first_two_cpus();
  const int first = cpus.first, second = cpus.second;
  if (second < 0) return std::nullopt;
  // The line both threads write: odd values are the pinger's, even the ponger's answers. A
  // negative value tells the ponger to stop.
  alignas(64) std::atomic<long> line{0};
  std::atomic<bool> ponger_pinned{false};
  std::thread ponger([&] {
    ponger_pinned = pin_to(second);
    long seen = 0;
    while (true) {
      const long v = line.load(std::memory_order_acquire);
      if (v < 0) return;
      // Answer only if the line still holds the ping: a plain store could overwrite the stop
      // signal the pinger wrote meanwhile (it gives up at the deadline on a busy machine), and
      // then neither thread would move again: the likely cause of a 600 s hang of `nnlab devices`
      // under ctest -j2.
      long ping = v;
      if (v != seen && (v & 1) && line.compare_exchange_strong(ping, v + 1, std::memory_order_acq_rel)) seen = v + 1;
    }
  });
  std::vector<double> batches;
  const Clock::time_point deadline = Clock::now() + kTimeLimit;
  // The calling thread's own mask comes back afterwards: only this measurement is pinned.
  cpu_set_t saved;
  const bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
  if (pin_to(first)) {
    long value = 0;
    bool late = false;
    for (int b = 0; b < kBatches && !late; ++b) {
      const Clock::time_point start = Clock::now();
      for (int trip = 0; trip < kTrips; ++trip) {
        value += 1;
        line.store(value, std::memory_order_release);
        value += 1;
        for (long spins = 1; line.load(std::memory_order_acquire) != value; ++spins)
          if (spins % 4096 == 0 && Clock::now() > deadline) {
            late = true;
            break;
          }
        if (late) break;
      }
      if (!late) batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kTrips);
    }
  }
  line.store(-1, std::memory_order_release);
  ponger.join();
  if (restore) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  if (batches.empty() || !ponger_pinned) return std::nullopt;
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

}  // namespace nnlab
