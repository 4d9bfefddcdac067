// How long a cache line takes to go from one core to another and back: the price every
// barrier and every hand-over of data between two threads pays. On a shared cloud machine the
// same two virtual CPUs can sit on one core complex (one L3 cache) at one moment and on two at
// the next; measured on the 2-vCPU Zen 5 machines this project runs on, the round trip flips
// between ~100 ns and ~400 ns within minutes, and the mlp's and lenet5's two-thread steps
// (about twenty parallel regions each) take 1.3–1.4× as long in the slow placement while a
// large sgemm does not change. `nnlab devices` and the benchmark print it so that a run says
// which placement it met.
#pragma once
#include <optional>

namespace nnlab {

// The median round trip in nanoseconds of one cache line between the first two CPUs of this
// process's affinity mask: one thread on each, each waiting (spinning) for the other's store.
// Empty when the process may run on fewer than two CPUs, or when the other thread was kept
// off its CPU (a busy machine) so long that no trip finished within the time limit.
std::optional<double> core_round_trip_ns();

}  // namespace nnlab
