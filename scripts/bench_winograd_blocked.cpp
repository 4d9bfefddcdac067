// Experiment: would activations kept channel-blocked by every op make the CPU's Winograd
// convolutions faster still?
//
// nnlab keeps activations as (n, c, h, w). Its F(4×4, 3×3) forward and data gradient, with
// AVX-512 and 16-channel blocks, transpose each 16 planes of an image into 16-channel pixels on
// the way in and each row of outputs back into planes on the way out
// (conv2d_winograd_channels.h). Libraries such as oneDNN keep activations channel-blocked
// instead, (n, c/16, h, w, 16), so neither transpose happens. This program times the forward
// convolution (bias and ReLU fused) of cifar-cnn's c2, c3 and c4 both ways, alternated call by
// call, and checks that both give the same outputs. The blocked kernel is written here only,
// with the library's own tile transforms (conv2d_winograd_tiles.h), channel-lane input and
// output transforms (conv2d_winograd_channels.h) and the same products (libxsmm, 36 per chunk
// of images): what differs is the layout at both ends.
//
// Build by hand after building the library (AVX-512 machine):
//   g++ -O3 -march=x86-64-v4 -fopenmp -std=c++17 -I. scripts/bench_winograd_blocked.cpp \
//       build/libnnlab_devices.a build/libnnlab_core.a -I/usr/include/x86_64-linux-gnu/openblas-openmp \
//       -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas /usr/lib/libxsmm.a -ldl -o bench_winograd_blocked
//   ./bench_winograd_blocked [reps] [threads]
#define NNLAB_ISA avx512
#include <libxsmm.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/random.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/conv2d_winograd_channels.h"
#include "devices/cpu/conv2d_winograd_tiles.h"
#include "devices/cpu/threads.h"

using namespace nnlab;
using cpu::avx512::ChannelVector;
using cpu::avx512::kChannelLanes;
using Tile = cpu::avx512::WinogradF4;

namespace {

constexpr int kPositions = Tile::n * Tile::n;  // 36
constexpr long kSlack = 16;                     // floats between the 36 matrices: no 4 KiB strides

// The forward of a 3×3, stride-1, pad-1 convolution on square planes in the blocked layout:
//   x (n, c/16, h, h, 16) → y (n, k/16, h, h, 16), y = relu(conv(x, w) + bias)
struct BlockedConvolution {
  long n, c, k, h;
  std::vector<float> u;  // U[ξ] (c × k) = (G g Gᵀ)[ξ] of every filter, ξ-major

  void transform_filters(const float* w) {  // w (k, c, 3, 3)
    u.assign(kPositions * c * k, 0.f);
    for (long ko = 0; ko < k; ++ko)
      for (long ci = 0; ci < c; ++ci) {
        const float* g = w + (ko * c + ci) * 9;
        float gt[Tile::n * 3], ggt[kPositions];
        for (int j = 0; j < 3; ++j) Tile::filter(g + j, 3, gt + j, 3);                       // G g
        for (int a = 0; a < Tile::n; ++a) Tile::filter(gt + 3 * a, 1, ggt + Tile::n * a, 1);  // (G g) Gᵀ
        for (int xi = 0; xi < kPositions; ++xi) u[(xi * c + ci) * k + ko] = ggt[xi];
      }
  }

  void forward(const float* x, const float* bias, float* y) const {
    const long tw = h / Tile::m, per_image = tw * tw;
    const cpu::avx512::Tiling t = cpu::avx512::tiling(Tile::m, h, h, 1, 1);
    const long chunk = std::clamp((1L << 20) / (kPositions * (c + k) * per_image * 4), 1L, n);
    const long chunks = (n + chunk - 1) / chunk;
#pragma omp parallel
    {
      std::vector<float> block(cpu::avx512::channel_block_floats(t), 0.f);
      std::vector<float> v(kPositions * (chunk * per_image * c + kSlack)), m(kPositions * (chunk * per_image * k + kSlack));
#pragma omp for schedule(dynamic, 1)
      for (long ck = 0; ck < chunks; ++ck) {
        const long first = ck * chunk, count = std::min(chunk, n - first), tiles = count * per_image;
        const long v_stride = tiles * c + kSlack, m_stride = tiles * k + kSlack;
        const long cols = cpu::avx512::channel_block_cols(t);
        for (long i = 0; i < count; ++i)
          for (long cb = 0; cb < c / kChannelLanes; ++cb) {  // rows of 16-channel pixels into the padded block
            const float* from = x + ((first + i) * (c / kChannelLanes) + cb) * h * h * kChannelLanes;
            for (long r = 0; r < h; ++r)  // rows of 16-channel pixels: plain copies
              std::copy(from + r * h * kChannelLanes, from + (r + 1) * h * kChannelLanes,
                        block.data() + ((r + 1) * cols + 1) * kChannelLanes);
            cpu::avx512::input_transform_channels<Tile>(block.data(), t, i * per_image, c, cb * kChannelLanes, v.data(),
                                                        v_stride);
          }
        // M[ξ] (tiles × k) = V[ξ] (tiles × c) · U[ξ] (c × k); libxsmm is column-major: Mᵀ = Uᵀ Vᵀ.
        const libxsmm_blasint mm = k, nn = tiles, kk = c, lda = k, ldb = c, ldc = k;
        const float alpha = 1, beta = 0;
        const libxsmm_smmfunction product = libxsmm_smmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &alpha, &beta, nullptr, nullptr);
        for (int xi = 0; xi < kPositions; ++xi)
          product(u.data() + xi * c * k, v.data() + xi * v_stride, m.data() + xi * m_stride);
        for (long i = 0; i < count; ++i)
          for (long kb = 0; kb < k / kChannelLanes; ++kb) {
            ChannelVector b, zero = {};
            cpu::avx512::load_channels(bias + kb * kChannelLanes, b);
            float* to = y + ((first + i) * (k / kChannelLanes) + kb) * h * h * kChannelLanes;
            for (long ty = 0; ty < tw; ++ty)
              for (long tx = 0; tx < tw; ++tx) {
                const float* from = m.data() + (i * per_image + ty * tw + tx) * k + kb * kChannelLanes;
                ChannelVector s[Tile::n][Tile::n], cols_done[Tile::m][Tile::n];
                for (int a = 0; a < Tile::n; ++a)
                  for (int j = 0; j < Tile::n; ++j) cpu::avx512::load_channels(from + (Tile::n * a + j) * m_stride, s[a][j]);
                for (int j = 0; j < Tile::n; ++j) Tile::output(&s[0][j], Tile::n, &cols_done[0][j], Tile::n);  // Aᵀ S
                for (int a = 0; a < Tile::m; ++a) {
                  ChannelVector out[Tile::m];
                  Tile::output(cols_done[a], 1, out, 1);  // (Aᵀ S) A
                  for (int j = 0; j < Tile::m; ++j) {
                    const ChannelVector sum = out[j] + b, kept = sum > zero ? sum : zero;
                    cpu::avx512::store_channels(to + ((Tile::m * ty + a) * h + Tile::m * tx + j) * kChannelLanes,
                                                kept);
                  }
                }
              }
          }
      }
    }
  }
};

// Element (i, ch, p) of an (n, channels, plane) tensor in the blocked layout.
long blocked_index(long i, long ch, long p, long channels, long plane) {
  return ((i * (channels / kChannelLanes) + ch / kChannelLanes) * plane + p) * kChannelLanes + ch % kChannelLanes;
}

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_ms(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return 1e3 * s[s.size() / 2];
}

void compare(const char* name, long c, long k, long h, int reps) {
  const long n = 64, plane = h * h;
  const Conv2dGeometry g{n, c, h, h, k, 3, 3, 1, 1, 1, 1, h, h};
  Tensor x = Tensor::empty({n, c, h, h}), w = Tensor::empty({k, c, 3, 3}), b = Tensor::empty({k});
  Tensor y = Tensor::empty({n, k, h, h});
  uniform_fill(x, -1, 1, RandomStream{1, RandomPurpose::Init, 1});
  uniform_fill(w, -1, 1, RandomStream{1, RandomPurpose::Init, 2});
  uniform_fill(b, -1, 1, RandomStream{1, RandomPurpose::Init, 3});
  std::vector<float> xb(n * c * plane), yb(n * k * plane);
  for (long i = 0; i < n; ++i)
    for (long ch = 0; ch < c; ++ch)
      for (long p = 0; p < plane; ++p) xb[blocked_index(i, ch, p, c, plane)] = x.data<float>()[(i * c + ch) * plane + p];
  BlockedConvolution blocked{n, c, k, h, {}};
  const auto planes = [&] { cpu::winograd_forward(g, cpu::WinogradTile::F4x4, x, w, &b, y, true); };
  const auto channels = [&] {
    blocked.transform_filters(w.data<float>());
    blocked.forward(xb.data(), b.data<float>(), yb.data());
  };
  planes(), channels(), planes(), channels();
  double largest = 0, scale = 0;
  for (long i = 0; i < n; ++i)
    for (long ko = 0; ko < k; ++ko)
      for (long p = 0; p < plane; ++p) {
        const float a = y.data<float>()[(i * k + ko) * plane + p], z = yb[blocked_index(i, ko, p, k, plane)];
        largest = std::max(largest, double(std::fabs(a - z)));
        scale = std::max(scale, double(std::fabs(a)));
      }
  std::vector<double> sp, sc;
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) sp.push_back(seconds(planes)), sc.push_back(seconds(channels));
    else sc.push_back(seconds(channels)), sp.push_back(seconds(planes));
  }
  std::printf("%s  (n, c, h, w) = (%ld, %ld, %ld, %ld) → %ld channels, medians of %d: nnlab's kernel %.3f ms, "
              "channel-blocked activations %.3f ms (ratio %.2f); largest difference %.1e of %.1e\n",
              name, n, c, h, h, k, reps, median_ms(sp), median_ms(sc), median_ms(sc) / median_ms(sp), largest, scale);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  set_cpu_threads(threads);
  omp_set_num_threads(threads);
  libxsmm_init();
  libxsmm_set_target_arch("avx512_core");
  std::printf("%d threads; F(4×4, 3×3) forward with bias and ReLU, batch 64\n", threads);
  compare("cifar-cnn c2", 32, 32, 32, reps);
  compare("cifar-cnn c3", 32, 64, 16, reps);
  compare("cifar-cnn c4", 64, 64, 16, reps);
}
