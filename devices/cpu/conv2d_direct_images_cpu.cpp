// The direct convolution's input gradient with the batch's images in the vector lanes, for
// layers whose other layouts waste most lanes on it: lenet5's second layer (6 → 16 channels,
// 5 × 5, 14 × 14 inputs) is the zoo's one.
//
//   dx[c, Y, X] = Σ_o Σ_ri Σ_si w[o, c, ri, si] · dy[o, Y − ri + pad_h, X − si + pad_w]
//                 over the taps whose dy index lies inside the (p, q) plane
//
// Why: the row layout (conv2d_direct_cpu.cpp) computes this as a correlation of dy bordered
// with r − 1 zeros, a vector of output columns at a time. For lenet5's 10 × 10 dy and 14 × 14
// dx, 6 of every 16 lanes' taps in a row read the border's zeros and 2 of 16 lanes lie past
// the row: 62% of its multiply-adds count. With one image per lane instead, every lane of a
// pixel meets the same taps, so the loops run over exactly the taps inside the plane.
//
// Each group of kLanes images is copied into a (k, p + 2, q, kLanes) buffer first (one zero
// row above and below every plane, see gradient_pixels), the gradient is computed into a
// (c, h, w, kLanes) buffer, and that is copied out to the images' (c, h, w) planes. A pixel
// keeps kRows × kB accumulator vectors (two dx rows, kB input channels) in registers: each tap
// loads two dy vectors and kB weights for 2 · kB multiply-adds.
//
// Threads: the groups are spread over the OpenMP threads; every dx value is one sum in a fixed
// order, so results do not depend on the thread count. Compiled once per instruction set,
// like the other direct layouts (kLanes images: 16 in AVX-512, 8 in AVX2). The CUDA side has
// no twin of this file: there cuDNN picks its own algorithm per layer (conv2d_cuda.cu).
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "devices/cpu/conv2d_direct_layout.h"
#include "devices/cpu/transpose_blocks.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

// dx rows Y … Y + kRows − 1 of pixel column X for the kB input channels whose weights are wp.
// The filter rows taken are those that meet a dy row inside the plane for some row of the
// pair; for the other row that dy row is one of the buffer's zero rows (at most one past
// either edge, hence one zero row on each side for kRows = 2).
// gdy: (k, p + 2, q, kLanes)   wp: (r, s, k, kB)   gdx: (c, h, w, kLanes)
template <typename T, int kRows, long kB>
void gradient_pixels(const Conv2dGeometry& g, const T* gdy, const T* wp, long cb, long Y, long X, T* gdx) {
  T acc[kRows][kB][kLanes] = {};
  const long ri_first = std::max(0L, Y + g.pad_h - g.p + 1), ri_last = std::min(g.r - 1, Y + kRows - 1 + g.pad_h);
  const long si_first = std::max(0L, X + g.pad_w - g.q + 1), si_last = std::min(g.s - 1, X + g.pad_w);
  const long plane = (g.p + 2) * g.q * kLanes;  // one channel of gdy
  for (long ri = ri_first; ri <= ri_last; ++ri)
    for (long si = si_first; si <= si_last; ++si) {
      // The pixel of dx row Y in gdy (padded row Y − ri + pad_h + 1), then one per channel o.
      const T* pixel = gdy + ((Y - ri + g.pad_h + 1) * g.q + X - si + g.pad_w) * kLanes;
      const T* wv = wp + (ri * g.s + si) * g.k * kB;
      for (long o = 0; o < g.k; ++o, pixel += plane, wv += kB) {
#pragma GCC unroll 8
        for (long j = 0; j < kB; ++j) {
          const T wj = wv[j];
#pragma GCC unroll 2
          for (int t = 0; t < kRows; ++t) {
#pragma omp simd
            for (long l = 0; l < kLanes; ++l) acc[t][j][l] += wj * pixel[t * g.q * kLanes + l];
          }
        }
      }
    }
  const long channels = std::min(kB, g.c - cb * kB);
  for (int t = 0; t < kRows; ++t)
    for (long j = 0; j < channels; ++j) {
      T* out = gdx + (((cb * kB + j) * g.h + Y + t) * g.w + X) * kLanes;
#pragma omp simd
      for (long l = 0; l < kLanes; ++l) out[l] = acc[t][j][l];
    }
}

// ---- moving kLanes images into the lanes and back ------------------------------------------
// Scalar copies, one element per load and store with a stride of kLanes floats, had cost 40%
// of the kernel's time on lenet5, so in AVX-512 float32 blocks of 16 × 16 are transposed in
// registers (transpose_blocks.h). AVX2's 8-lane permutes of two vectors take several
// instructions; there the scalar copies measured faster (0.157 against 0.172 ms on lenet5), as
// they are for float64 (gradient checks).

// to[at · kLanes + l] = from[l · stride + at] for at < count, l < images (zero lanes after):
// `images` planes of `count` values each, interleaved one value per lane.
template <typename T>
void interleave_planes(const T* from, long stride, long images, long count, T* to) {
  long at = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>)
    for (; at + 16 <= count; at += 16) {
      __m512 rows[16];
      for (long l = 0; l < 16; ++l) rows[l] = l < images ? _mm512_loadu_ps(from + l * stride + at) : _mm512_setzero_ps();
      transpose_16x16(rows);
      for (long r = 0; r < 16; ++r) _mm512_storeu_ps(to + (at + r) * 16, rows[r]);
    }
#endif
  for (long l = 0; l < kLanes; ++l)
    for (long a = at; a < count; ++a) to[a * kLanes + l] = l < images ? from[l * stride + a] : T(0);
}

// The way back: to[l · stride + at] = from[at · kLanes + l] for at < count, l < images.
template <typename T>
void separate_planes(const T* from, long images, long count, T* to, long stride) {
  long at = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>)
    for (; at + 16 <= count; at += 16) {
      __m512 rows[16];
      for (long r = 0; r < 16; ++r) rows[r] = _mm512_loadu_ps(from + (at + r) * 16);
      transpose_16x16(rows);
      for (long l = 0; l < images; ++l) _mm512_storeu_ps(to + l * stride + at, rows[l]);
    }
#endif
  for (long l = 0; l < images; ++l)
    for (long a = at; a < count; ++a) to[l * stride + a] = from[a * kLanes + l];
}

// wp[cb][ri][si][o][j] = w[o, cb · kB + j, ri, si], zero past the last channel: the channels
// o of one tap, the innermost loop of gradient_pixels, lie one after another.
template <typename T, long kB>
Tensor pack_by_input_channel(const Conv2dGeometry& g, const Tensor& w) {
  const long blocks = (g.c + kB - 1) / kB, taps = g.r * g.s;
  Tensor result = Tensor::zeros({blocks * g.k * taps * kB}, w.dtype(), w.device());
  const T* from = w.data<T>();
  T* to = result.data<T>();
  for (long o = 0; o < g.k; ++o)
    for (long c = 0; c < g.c; ++c)
      for (long tap = 0; tap < taps; ++tap)
        to[(((c / kB) * taps + tap) * g.k + o) * kB + c % kB] = from[(o * g.c + c) * taps + tap];
  return result;
}

}  // namespace

// dy: (n, k, p, q)  w: (k, c, r, s)  dx: (n, c, h, w)
void images_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data", dy, [&](auto tag) {
    using T = decltype(tag);
    const long groups = (g.n + kLanes - 1) / kLanes;
    const long dy_floats = g.k * (g.p + 2) * g.q * kLanes, dx_floats = g.c * g.h * g.w * kLanes;
    const long threads = omp_get_max_threads();
    Tensor work = Tensor::empty({threads * (dy_floats + dx_floats)}, dy.dtype(), dy.device());
    const T* dy_data = dy.data<T>();
    T *dx_data = dx.data<T>(), *ws = work.data<T>();
    with_channel_block(g.c, [&](auto block) {
      constexpr long kB = decltype(block)::value;
      constexpr int kRows = 2 * kB <= kAccumulators ? 2 : 1;
      const Tensor packed = pack_by_input_channel<T, kB>(g, w);
      const T* wp = packed.data<T>();
      const long blocks = (g.c + kB - 1) / kB, plane_in = g.p * g.q, plane_out = g.h * g.w;
      for_each_image(groups, kLanes * g.k * plane_in * g.c * g.r * g.s, [&](long group, int slot) {
        T* gdy = ws + slot * (dy_floats + dx_floats);
        T* gdx = gdy + dy_floats;
        const long first = group * kLanes, images = std::min(kLanes, g.n - first);
        // dy of the group's images, one per lane, with a zero row above and below each plane
        // and zero lanes past the last image.
        for (long o = 0; o < g.k; ++o) {
          T* plane = gdy + o * (g.p + 2) * g.q * kLanes;
          std::fill(plane, plane + g.q * kLanes, T(0));
          interleave_planes(dy_data + (first * g.k + o) * plane_in, g.k * plane_in, images, plane_in,
                            plane + g.q * kLanes);
          std::fill(plane + (g.p + 1) * g.q * kLanes, plane + (g.p + 2) * g.q * kLanes, T(0));
        }
        for (long cb = 0; cb < blocks; ++cb) {
          const T* wblock = wp + cb * g.k * g.r * g.s * kB;
          long Y = 0;
          for (; Y + kRows <= g.h; Y += kRows)
            for (long X = 0; X < g.w; ++X) gradient_pixels<T, kRows, kB>(g, gdy, wblock, cb, Y, X, gdx);
          for (; Y < g.h; ++Y)
            for (long X = 0; X < g.w; ++X) gradient_pixels<T, 1, kB>(g, gdy, wblock, cb, Y, X, gdx);
        }
        for (long c = 0; c < g.c; ++c)
          separate_planes(gdx + c * plane_out * kLanes, images, plane_out, dx_data + (first * g.c + c) * plane_out,
                          g.c * plane_out);
      });
    });
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
