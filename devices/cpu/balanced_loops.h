// The loops that spread a CPU kernel's pieces of work (images, chunks of images) over the
// OpenMP threads, so that every thread stays busy when the cores are not equally fast.
//
// Why: an even split gives each thread the same share and waits at the region's end for the
// slowest. Cores are often uneven: a laptop's efficiency cores, a hardware sibling busy with
// another program, a virtual CPU whose host core is shared. On our 2-CPU cloud machine one CPU
// at times ran a loop at 70% of the other's rate for seconds on end, and two threads then ran
// cifar-cnn's step in 30.5–36.4 ms where a perfect split of the work takes 26 ms
// (docs/cpu-kernels.md, "Two threads and their round trip").
// Handing every piece to whichever thread is free (schedule(dynamic)) fixes that and costs as
// much elsewhere: image i no longer stays on one core from layer to layer, and its activations
// cross between the cores' caches (cifar-cnn's step 5–7% slower on even CPUs). So each thread
// owns the share an even split would give it and takes its pieces from the front; a thread
// whose share is done takes pieces from the back of another's (work stealing). On even cores
// almost nothing is stolen; on uneven ones the slow core's last pieces go to the fast one.
//
// Results must not depend on which thread ran what:
//   for_each_item   pieces that write outputs of their own: any order gives the same bits.
//   for_each_run    pieces whose results are summed (a filter gradient over the batch): the
//                   pieces go in fixed runs of consecutive pieces, each run sums into a partial
//                   of its own, and the caller adds the partials in run order. The runs depend
//                   on the pieces and the thread count only, as the per-thread partials of an
//                   even split did.
// `slot` is the running thread's number (its workspace), 0 when the loop runs on one thread.
//
// In namespace cpu::NNLAB_ISA like the kernels that use it (cpu_isa.h): add_partials<float>
// compiled for AVX-512 must not stand in for the baseline's copy (scripts/check_isa.py).
#pragma once

#ifndef NNLAB_ISA
#error "balanced_loops.h is compiled per instruction set (NNLAB_ISA, CMakeLists.txt)"
#endif

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "devices/cpu/dispatch.h"

namespace nnlab::cpu::NNLAB_ISA {

// Runs per thread in for_each_run: with 4, a core at two thirds of the other's speed leaves
// the faster one at most about a run's time idle at the end, and the partials stay few.
constexpr long kRunsPerThread = 4;

namespace detail {

// One thread's share [front, back) of the pieces, in one word so that the owner (from the
// front) and a thief (from the back) each take a piece with one compare-and-swap.
struct alignas(64) Share {
  std::atomic<uint64_t> bounds;
  static uint64_t pack(uint32_t front, uint32_t back) { return uint64_t(back) << 32 | front; }
  // Takes the front (or back) piece into `piece`; false when the share is empty.
  bool take(bool from_back, long& piece) {
    uint64_t now = bounds.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t front = uint32_t(now), back = uint32_t(now >> 32);
      if (front >= back) return false;
      const uint64_t next = from_back ? pack(front, back - 1) : pack(front + 1, back);
      if (bounds.compare_exchange_weak(now, next, std::memory_order_relaxed)) {
        piece = from_back ? back - 1 : front;
        return true;
      }
    }
  }
};

// body(piece, slot) for pieces [0, n): each thread its even share from the front, then the
// other threads' remaining pieces from their backs.
template <typename Body>
void run_shares(long n, bool parallel, Body&& body) {
  if (!parallel || n <= 1 || omp_in_parallel()) {
    for (long i = 0; i < n; ++i) body(i, 0);
    return;
  }
  // The shares are set before the region (no barrier inside it); a thread the team lacks
  // leaves its share to the others.
  const long most = omp_get_max_threads();
  std::unique_ptr<Share[]> shares(new Share[static_cast<size_t>(most)]);
  for (long t = 0; t < most; ++t)
    shares[t].bounds.store(Share::pack(uint32_t(t * n / most), uint32_t((t + 1) * n / most)));
#pragma omp parallel num_threads(int(most))
  {
    const long me = omp_get_thread_num();
    long piece;
    while (shares[me].take(false, piece)) body(piece, int(me));
    for (long other = 1; other < most; ++other) {
      Share& victim = shares[(me + other) % most];
      while (victim.take(true, piece)) body(piece, int(me));
    }
  }
}

}  // namespace detail

template <typename Body>
void for_each_item(long n, bool parallel, Body&& body) {
  detail::run_shares(n, parallel, body);
}

// How many runs for_each_run cuts n pieces into: one partial each. Inside a parallel region
// (a batch slice's ops, apps/batch_slices.h) a loop's region has a team of one: one run, so the
// pieces are summed in order, as on one thread.
inline long summing_runs(long n, bool parallel) {
  if (!parallel || omp_in_parallel()) return 1;
  return std::clamp(kRunsPerThread * long(omp_get_max_threads()), 1L, std::max(n, 1L));
}

// The first of n pieces in run r of `runs`.
inline long run_start(long r, long n, long runs) { return r * n / runs; }

// body(piece, slot, run) for pieces [0, n) in `runs` runs (summing_runs), run r being pieces
// [run_start(r), run_start(r + 1)) in order.
template <typename Body>
void for_each_run(long n, long runs, bool parallel, Body&& body) {
  detail::run_shares(runs, parallel, [&](long r, int slot) {
    for (long i = run_start(r, n, runs); i < run_start(r + 1, n, runs); ++i) body(i, slot, r);
  });
}

// partial[i] = partial[i] + partial[floats + i] + … + partial[(runs − 1)·floats + i], added
// in run order, for the `runs` partials of `floats` each that for_each_run's runs summed into,
// a block of i per thread at a time.
template <typename T>
void add_partials(T* partial, long floats, long runs) {
  constexpr long kBlock = 4096;
  const long blocks = (floats + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (runs > 1 && blocks > 1 && floats * runs > kParallelGrain)
  for (long b = 0; b < blocks; ++b) {
    T* to = partial + b * kBlock;
    const long count = std::min(kBlock, floats - b * kBlock);
    for (long run = 1; run < runs; ++run) {
      const T* from = to + run * floats;
#pragma omp simd
      for (long i = 0; i < count; ++i) to[i] += from[i];
    }
  }
}

}  // namespace nnlab::cpu::NNLAB_ISA
