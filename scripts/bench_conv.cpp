// Micro-benchmark of the CPU convolution kernels on the convolution layers of cnn, lenet5,
// cifar-cnn and resnet8 (its stride-1 3×3 layers) at batch 64: forward, backward data and
// backward filter in GFLOP/s, beside the rate of one plain sgemm of the forward's shape (the
// practical peak the kernels can approach) and of the per-image alternative (one small sgemm
// per image, images spread over the threads). Where Winograd applies, both its algorithms,
// timed in alternation, with the ratio of their medians.
//
// It times the kernel table directly — the one place outside autograd/ops that does, because
// it measures the kernels themselves. Build by hand after building the library:
//   g++ -O3 -march=x86-64-v3 -fopenmp -std=c++17 -I. scripts/bench_conv.cpp build/libnnlab_devices.a \
//       build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp \
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas /usr/lib/libxsmm.a -ldl -o bench_conv
//   ./bench_conv [reps] [threads] [layer]  (layer: a name prefix such as "lenet5"; NNLAB_CPU_ISA=avx2
//                                           ./bench_conv: the AVX2 kernels)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/threads.h"
#include "devices/registry.h"

using namespace nnlab;

namespace {

// One timed run of f, its seconds appended to s.
void time_once(const std::function<void()>& f, std::vector<double>& s) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The best and the median of s.
std::pair<double, double> best_median(std::vector<double>& s) {
  std::sort(s.begin(), s.end());
  return {s.front(), s[s.size() / 2]};
}

// Best and median seconds of `reps` timed runs after two warm-up runs.
std::pair<double, double> time_it(int reps, const std::function<void()>& f) {
  f(), f();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) time_once(f, s);
  return best_median(s);
}

// The same for two functions run in turn, a then b, b then a, ... after a warm-up of each.
std::pair<std::pair<double, double>, std::pair<double, double>> time_alternated(int reps, const std::function<void()>& a,
                                                                               const std::function<void()>& b) {
  a(), b(), a(), b();
  std::vector<double> sa, sb;
  for (int i = 0; i < reps; ++i) {
    if (i % 2 == 0) time_once(a, sa), time_once(b, sb);
    else time_once(b, sb), time_once(a, sa);
  }
  return {best_median(sa), best_median(sb)};
}

void report(const char* what, double flops, std::pair<double, double> t) {
  std::printf("  %-28s %8.3f ms best %8.3f ms median   %6.1f GFLOP/s best %6.1f median\n", what, 1e3 * t.first,
              1e3 * t.second, flops / t.first * 1e-9, flops / t.second * 1e-9);
}

Tensor random_tensor(Shape s, uint32_t stream) {
  Tensor t = Tensor::empty(s);
  uniform_fill(t, -1, 1, RandomStream{1, RandomPurpose::Init, stream});
  return t;
}

void bench_layer(const char* name, Conv2dGeometry g, int reps) {
  g.p = (g.h + 2 * g.pad_h - g.r) / g.stride_h + 1;
  g.q = (g.w + 2 * g.pad_w - g.s) / g.stride_w + 1;
  const long crs = g.c * g.r * g.s, pq = g.p * g.q;
  const double flops = 2.0 * g.n * g.k * crs * pq;
  std::printf("%s: x (%ld, %ld, %ld, %ld)  w (%ld, %ld, %ld, %ld)  %.1f MFLOP per direction\n", name, g.n, g.c, g.h,
              g.w, g.k, g.c, g.r, g.s, flops * 1e-6);
  Backend& be = backend_for(Device::cpu());
  Tensor x = random_tensor({g.n, g.c, g.h, g.w}, 1), w = random_tensor({g.k, g.c, g.r, g.s}, 2);
  Tensor b = random_tensor({g.k}, 3), dy = random_tensor({g.n, g.k, g.p, g.q}, 4);
  Tensor y = Tensor::empty(dy.shape()), dx = Tensor::empty(x.shape()), dw = Tensor::empty(w.shape());
  Tensor none;  // a gradient not asked for
  const ConvEpilogue plain;
  report("forward (+bias)", flops, time_it(reps, [&] { be.conv2d_forward(g, plain, x, w, &b, y, nullptr); }));
  report("backward data", flops, time_it(reps, [&] { be.conv2d_backward(g, plain, dy, none, x, w, dx, none, none); }));
  report("backward filter", flops,
         time_it(reps, [&] { be.conv2d_backward(g, plain, dy, none, x, w, none, dw, none); }));
  const cpu::ConvDirection forward = cpu::ConvDirection::Forward;
  if (cpu::plan_conv(g, forward, DType::Float32, ConvImpl::Auto).algorithm == cpu::ConvAlgorithm::Winograd) {
    // Both Winograd algorithms, whichever the plan chose, timed in alternation (one run of each
    // per repetition) so that a machine's slow spell falls on both: the ratio of their medians
    // is what the plan's choice rests on.
    using cpu::WinogradTile;
    const auto compare = [&](const char* what, const std::function<void(WinogradTile)>& f) {
      const auto [f2, f4] = time_alternated(reps, [&] { f(WinogradTile::F2x2); }, [&] { f(WinogradTile::F4x4); });
      report((std::string("F(2×2,3×3) ") + what).c_str(), flops, f2);
      report((std::string("F(4×4,3×3) ") + what).c_str(), flops, f4);
      std::printf("  %-28s %8.2f (median F(4×4) / median F(2×2))\n", (std::string(what) + " ratio").c_str(),
                  f4.second / f2.second);
    };
    compare("forward", [&](WinogradTile t) { cpu::winograd_forward(g, t, x, w, &b, y, false); });
    compare("bwd data", [&](WinogradTile t) { cpu::winograd_backward_data(g, t, dy, w, dx); });
    compare("bwd filter", [&](WinogradTile t) { cpu::winograd_backward_filter(g, t, dy, x, dw, nullptr); });
  }

  // The forward's GEMM alone: W (k × crs) · cols (crs × n·pq).
  std::vector<float> cols(crs * g.n * pq, 0.5f), out(g.k * g.n * pq);
  const float* wp = w.data<float>();
  report("sgemm k×(n·pq)×crs alone", flops, time_it(reps, [&] {
           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(g.k), int(g.n * pq), int(crs), 1.f, wp,
                       int(crs), cols.data(), int(g.n * pq), 0.f, out.data(), int(g.n * pq));
         }));
  // Per image: n GEMMs of k × pq × crs, one image per thread at a time (OpenBLAS runs
  // single-threaded inside an OpenMP parallel region).
  report("per-image sgemm k×pq×crs", flops, time_it(reps, [&] {
#pragma omp parallel for schedule(static)
           for (long i = 0; i < g.n; ++i)
             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(g.k), int(pq), int(crs), 1.f, wp, int(crs),
                         cols.data() + i * crs * pq, int(pq), 0.f, out.data() + i * g.k * pq, int(pq));
         }));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  set_cpu_threads(argc > 2 ? std::atoi(argv[2]) : 0);  // 0: one thread per core
  std::printf("%s, %d threads; OpenBLAS %s\n", cpu_model_name().c_str(), cpu_threads(), openblas_build());
  //                            n   c   h   w   k   r  s  stride  pad
  const std::string only = argc > 3 ? argv[3] : "";
  const auto run = [&](const char* name, Conv2dGeometry g) {
    if (only.empty() || std::string(name).rfind(only, 0) == 0) bench_layer(name, g, reps);
  };
  run("cnn conv1", Conv2dGeometry{64, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 0, 0});
  run("cnn conv2", Conv2dGeometry{64, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 0, 0});
  run("lenet5 c1", Conv2dGeometry{64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 0, 0});
  run("lenet5 c2", Conv2dGeometry{64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 0, 0});
  run("cifar-cnn c1", Conv2dGeometry{64, 3, 32, 32, 32, 3, 3, 1, 1, 1, 1, 0, 0});
  run("cifar-cnn c2", Conv2dGeometry{64, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 0, 0});
  run("cifar-cnn c3", Conv2dGeometry{64, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 0, 0});
  run("cifar-cnn c4", Conv2dGeometry{64, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 0, 0});
  run("resnet8 layer1", Conv2dGeometry{64, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1, 0, 0});
  run("resnet8 layer2", Conv2dGeometry{64, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1, 0, 0});
  run("resnet8 layer3", Conv2dGeometry{64, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 0, 0});
  return 0;
}
