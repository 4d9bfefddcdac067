// The cache-line round trip between two CPUs (devices/cpu/core_latency.h): a number where the
// process may run on two CPUs, nothing where it may run on one (where two spinning threads
// would take turns on the one CPU, a time slice each). Tests the mechanism, never a timing.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <optional>
#include <thread>

#include "devices/cpu/core_latency.h"
#include "devices/cpu/threads.h"

using namespace nnlab;

TEST_CASE("core_round_trip_ns: a finite time on two CPUs, none on one", "[threads]") {
  if (cpu_cores() >= 2) {
    const std::optional<double> trip = core_round_trip_ns();
    // Empty only when another program kept a CPU busy through the whole time limit.
    if (trip) {
      CHECK(*trip > 1.0);    // a trip is two stores seen by another core: never a nanosecond
      CHECK(*trip < 1.0e7);  // the measurement gives up after 200 ms
    }
  }
  // A thread restricted to one CPU measures on its own mask (sched_getaffinity of the caller).
  bool pinned = false;
  std::optional<double> on_one_cpu = 1.0;
  std::thread one([&] {
    cpu_set_t all, set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &set);
        break;
      }
    pinned = pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
    on_one_cpu = core_round_trip_ns();
  });
  one.join();
  REQUIRE(pinned);
  CHECK_FALSE(on_one_cpu.has_value());
}
