// Timing and comparison helpers shared by the hand-built GEMM micro-benchmarks
// (bench_small_gemm.cpp, bench_libxsmm.cpp).
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace bench {

// Best time of 5 runs of `reps` calls, as GFLOP/s for 2·m·n·k flops a call (P has m, n, k).
template <typename P, typename F>
double gflops(const P& p, int reps, F call) {
  call();
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) call();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps);
  }
  return 2.0 * p.m * p.n * p.k / best * 1e-9;
}

inline double largest_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::fabs(x[i] - y[i])));
  return worst;
}

}  // namespace bench
