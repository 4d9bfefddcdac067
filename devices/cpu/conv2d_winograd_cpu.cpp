// Winograd convolution F(2×2, 3×3) on the CPU: the 3×3, stride-1 convolutions of the zoo
// with at least kWinogradMinChannels channels in and out (the cnn's second layer, most of
// cifar-cnn and resnet8). Chosen by conv2d_cpu.cpp; the CUDA twin of this choice is cuDNN's
// own algorithm search (conv2d_cuda.cu), which may pick its Winograd kernels itself.
//
// Why: a 2×2 block of outputs of a 3×3 filter costs 4·9 = 36 multiply-adds per channel pair
// directly, but only 16 in Winograd's minimal filtering algorithm (Lavin & Gray 2015):
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A          d: 4×4 input tile, g: 3×3 filter, Y: 2×2
//        ⎡1  0 -1  0⎤        ⎡ 1    0    0 ⎤        ⎡1  1  1  0⎤
//   Bᵀ = ⎢0  1  1  0⎥   G =  ⎢1/2  1/2  1/2⎥   Aᵀ = ⎣0  1 -1 -1⎦
//        ⎢0 -1  1  0⎥        ⎢1/2 -1/2  1/2⎥
//        ⎣0  1  0 -1⎦        ⎣ 0    0    1 ⎦
// Summed over input channels, each of the 16 tile positions ξ becomes one matrix product:
//   M[ξ] (k × tiles) = U[ξ] (k × c) · V[ξ] (c × tiles),  U = G g Gᵀ,  V = Bᵀ d B,
// so 2.25× fewer flops go through 16 small matrix products (small_gemm.h), plus cheap add-only
// transforms.
//
// The three directions:
//   forward          y  = the product above, then Aᵀ M A per tile (+ bias)
//   backward data    dx = the same forward convolution of dy with the filter rotated by 180°
//                         and its in/out channels swapped, padding 2 − pad (stride 1)
//   backward filter  L = ⟨dy, y⟩ is bilinear in (g, d), so ∂L/∂g = Gᵀ [ Σ_tiles (A dY Aᵀ) ⊙ (Bᵀ d B) ] G:
//                    S[ξ] (k × c) = Σ Z[ξ] (k × tiles) · V[ξ]ᵀ (tiles × c),  Z = A dY Aᵀ,
//                    then dW = Gᵀ S G per (k, c)
// Output tiles that hang over the bottom or right edge (odd p or q) are computed and dropped
// in the forward; in the filter gradient their dY cells count as zero.
//
// Threads: images go in chunks sized so one chunk's transformed tiles stay in a core's L2
// cache; chunks are spread over the OpenMP threads and each runs its products single-threaded.
// Every output element comes from one chunk in a fixed order; the filter gradient sums
// per-thread partials in thread order, so for a given thread count results repeat bit for bit.
//
// Compiled once per instruction set (cpu_isa.h), into cpu::avx2 and cpu::avx512, each with its
// own small_gemm and even/odd splits; which shapes it serves (winograd_applies) is decided in
// conv2d_cpu.cpp.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/even_odd.h"
#include "devices/cpu/small_gemm.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

constexpr int kTile = 16;                      // 4×4 transformed positions ξ
constexpr long kChunkBytes = 1L << 20;         // transformed tiles of one chunk: about a core's L2

// The per-position products: float32 through small_gemm.h's register-blocked loops, float64
// (gradcheck) through OpenBLAS.
//   C (m × n)  = A (m × k) · B (k × n)
void product(long m, long n, long k, const float* a, const float* b, float* c) {
  small_gemm_nn(m, n, k, a, b, c, false);
}
void product(long m, long n, long k, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, a, int(k), b, int(n), 0.0, c,
              int(n));
}
//   C (m × n) += A (m × t) · B (n × t)ᵀ
void add_product_nt(long m, long n, long t, const float* a, const float* b, float* c) {
  small_gemm_nt(m, n, t, a, b, c);
}
void add_product_nt(long m, long n, long t, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(t), 1.0, a, int(t), b, int(t), 1.0, c,
              int(n));
}

// One plane's tiling: tiles of 2×2 outputs, the input tile of tile (ty, tx) starting at
// row 2·ty − pad_h, column 2·tx − pad_w.
struct Tiling {
  long h, w, pad_h, pad_w;  // the input plane and its padding
  long p, q;                // output size
  long th, tw;              // tiles down and across
  long per_plane() const { return th * tw; }
};

Tiling tiling(long h, long w, long pad_h, long pad_w) {
  const long p = h + 2 * pad_h - 2, q = w + 2 * pad_w - 2;
  return {h, w, pad_h, pad_w, p, q, (p + 1) / 2, (q + 1) / 2};
}

// Images per chunk: as many as keep `floats_per_image` transformed values within kChunkBytes.
long chunk_images(long n, long floats_per_image, long bytes_per_float) {
  return std::clamp(kChunkBytes / std::max(1L, floats_per_image * bytes_per_float), 1L, n);
}

// ---- transforms of a whole plane -----------------------------------------------------------
// Each plane is first copied into a zero-bordered buffer, so that every tile reads a full
// 4×4 block without bounds tests. The buffer keeps even and odd columns apart (two
// half-planes): tile tx reads padded columns 2tx … 2tx + 3, i.e. even[tx], odd[tx],
// even[tx + 1], odd[tx + 1], so consecutive tiles read consecutive floats and one row of
// tiles becomes one vector loop (one lane per tile). Its results go to out[ξ · stride + tx],
// again consecutive.
//
// Rows of tiles are short (7 tiles for a 14×14 image), too short for the compiler's vector
// loops, which would leave them to scalar tails. So every row runs whole groups of kLanes
// tiles: its last group computes up to kLanes − 1 tiles too many and stores them after the
// row, where the next row written (same plane, or the next plane: rows are written in
// increasing address order) overwrites them. Each matrix of transformed tiles is followed by
// kLanes floats of slack that take the last row's overhang.
constexpr long kLanes = 8;

long round_to_lanes(long tiles) { return (tiles + kLanes - 1) / kLanes * kLanes; }
// Floats in one row of a half-plane: the even (or odd) input columns of round_to_lanes(tw)
// tiles, 2·round_to_lanes(tw) + 2 columns in all.
long half_cols(const Tiling& t) { return round_to_lanes(t.tw) + 1; }
// Floats of scratch one plane's transform needs: both half-planes. The input's padding (at
// most 2 on each side) and the rounding of the tiles keep the plane inside them.
long scratch_floats(const Tiling& t) { return 2 * (2 * t.th + 2) * half_cols(t); }
// Distance between the 16 matrices V[ξ] (rows × tiles each) in a workspace: with the slack.
long matrix_stride(long rows, long tiles) { return rows * tiles + kLanes; }

// Copies the h × w plane into the half-planes `even` and `odd` (rows of `hc` floats) at
// padded row `top`, padded column `left`. Only the plane's own cells are written: the border,
// zeroed once per kernel call, stays zero.
template <typename T>
void place_plane(const T* plane, long h, long w, long top, long left, long hc, T* even, T* odd) {
  const long first_even = left & 1;  // the first input column that lands on an even padded column
  for (long r = 0; r < h; ++r) {
    T* to_even = even + (top + r) * hc + (left + first_even) / 2;  // gets src[first_even + 2k]
    T* to_odd = odd + (top + r) * hc + (left + 1 - first_even) / 2;   // gets src[1 − first_even + 2k]
    if (first_even == 0)
      split_even_odd(plane + r * w, w, to_even, to_odd);
    else
      split_even_odd(plane + r * w, w, to_odd, to_even);
  }
}

// V = Bᵀ d B for every tile of one plane (h × w); V[ξ] of tile (ty, tx) goes to
// out[ξ · stride + ty · tw + tx].
template <typename T>
void input_transform(const T* plane, const Tiling& t, T* scratch, T* out, long stride) {
  const long hc = half_cols(t), lanes = round_to_lanes(t.tw);
  T *even = scratch, *odd = scratch + (2 * t.th + 2) * hc;
  place_plane(plane, t.h, t.w, t.pad_h, t.pad_w, hc, even, odd);
  for (long ty = 0; ty < t.th; ++ty) {
    const T* e[4] = {even + 2 * ty * hc, even + (2 * ty + 1) * hc, even + (2 * ty + 2) * hc, even + (2 * ty + 3) * hc};
    const T* o[4] = {odd + 2 * ty * hc, odd + (2 * ty + 1) * hc, odd + (2 * ty + 2) * hc, odd + (2 * ty + 3) * hc};
    T* row = out + ty * t.tw;
#pragma omp simd
    for (long l = 0; l < lanes; ++l) {
      T d[4][4];  // the tile: 4 rows of padded columns 2l … 2l + 3
      for (int r = 0; r < 4; ++r) {
        d[r][0] = e[r][l];
        d[r][1] = o[r][l];
        d[r][2] = e[r][l + 1];
        d[r][3] = o[r][l + 1];
      }
      T u[4][4];  // Bᵀ d: rows (d0 − d2, d1 + d2, d2 − d1, d1 − d3)
      for (int b = 0; b < 4; ++b) {
        u[0][b] = d[0][b] - d[2][b];
        u[1][b] = d[1][b] + d[2][b];
        u[2][b] = d[2][b] - d[1][b];
        u[3][b] = d[1][b] - d[3][b];
      }
      for (int a = 0; a < 4; ++a) {  // (Bᵀ d) B: the same on columns
        row[(4 * a + 0) * stride + l] = u[a][0] - u[a][2];
        row[(4 * a + 1) * stride + l] = u[a][1] + u[a][2];
        row[(4 * a + 2) * stride + l] = u[a][2] - u[a][1];
        row[(4 * a + 3) * stride + l] = u[a][1] - u[a][3];
      }
    }
  }
}

// U = G g Gᵀ of one 3×3 filter g (g[i·3 + j]); U[ξ] goes to out[ξ · stride].
template <typename T>
void filter_tile(const T* g, T* out, long stride) {
  T u[4][3];  // G g: combine rows
  for (int j = 0; j < 3; ++j) {
    u[0][j] = g[j];
    u[1][j] = T(0.5) * (g[j] + g[3 + j] + g[6 + j]);
    u[2][j] = T(0.5) * (g[j] - g[3 + j] + g[6 + j]);
    u[3][j] = g[6 + j];
  }
  for (int a = 0; a < 4; ++a) {  // (G g) Gᵀ: combine columns
    out[(a * 4 + 0) * stride] = u[a][0];
    out[(a * 4 + 1) * stride] = T(0.5) * (u[a][0] + u[a][1] + u[a][2]);
    out[(a * 4 + 2) * stride] = T(0.5) * (u[a][0] - u[a][1] + u[a][2]);
    out[(a * 4 + 3) * stride] = u[a][2];
  }
}

// Y = Aᵀ m A (+ bias) for every tile of one p × q output plane y, m[ξ] of tile (ty, tx) read
// from in[ξ · stride + ty · tw + tx]. A row of tiles is computed into four scratch rows (even
// and odd columns of the top and bottom output rows), then interleaved into y; a last tile
// hanging over the edge is computed and not copied.
template <typename T>
void output_transform(const T* in, long stride, const Tiling& t, T bias, T* scratch, T* y) {
  const long lanes = round_to_lanes(t.tw);
  T *top_even = scratch, *top_odd = scratch + lanes, *bottom_even = top_odd + lanes, *bottom_odd = bottom_even + lanes;
  for (long ty = 0; ty < t.th; ++ty) {
    const T* m = in + ty * t.tw;
#pragma omp simd
    for (long l = 0; l < lanes; ++l) {
      T c0[4], c1[4];  // Aᵀ m: rows (m0 + m1 + m2, m1 − m2 − m3)
      for (int b = 0; b < 4; ++b) {
        const T m0 = m[b * stride + l], m1 = m[(4 + b) * stride + l], m2 = m[(8 + b) * stride + l],
                m3 = m[(12 + b) * stride + l];
        c0[b] = m0 + m1 + m2;
        c1[b] = m1 - m2 - m3;
      }
      top_even[l] = c0[0] + c0[1] + c0[2] + bias;  // (Aᵀ m) A: the same on columns
      top_odd[l] = c0[1] - c0[2] - c0[3] + bias;
      bottom_even[l] = c1[0] + c1[1] + c1[2] + bias;
      bottom_odd[l] = c1[1] - c1[2] - c1[3] + bias;
    }
    const long row = 2 * ty;
    for (int half = 0; half < 2 && row + half < t.p; ++half) {
      const T* ev = half ? bottom_even : top_even;
      const T* od = half ? bottom_odd : top_odd;
      merge_even_odd(ev, od, t.q, y + (row + half) * t.q);
    }
  }
}

// Z = A dY Aᵀ for the 2×2 output-gradient tiles of one p × q plane dy (cells beyond it are
// zero); Z[ξ] of tile (ty, tx) goes to out[ξ · stride + ty · tw + tx]. The plane is split
// into even and odd columns as in input_transform.
template <typename T>
void output_grad_transform(const T* dy, const Tiling& t, T* scratch, T* out, long stride) {
  const long hc = half_cols(t), lanes = round_to_lanes(t.tw);
  T *even = scratch, *odd = scratch + (2 * t.th + 2) * hc;
  place_plane(dy, t.p, t.q, 0, 0, hc, even, odd);
  for (long ty = 0; ty < t.th; ++ty) {
    const T *e0 = even + 2 * ty * hc, *e1 = e0 + hc;  // columns 2l of the tile's two rows
    const T *o0 = odd + 2 * ty * hc, *o1 = o0 + hc;   // columns 2l + 1
    T* row = out + ty * t.tw;
#pragma omp simd
    for (long l = 0; l < lanes; ++l) {
      const T e[2][2] = {{e0[l], o0[l]}, {e1[l], o1[l]}};
      T u[4][2];  // A e: rows (e0, e0 + e1, e0 − e1, −e1)
      for (int b = 0; b < 2; ++b) {
        u[0][b] = e[0][b];
        u[1][b] = e[0][b] + e[1][b];
        u[2][b] = e[0][b] - e[1][b];
        u[3][b] = -e[1][b];
      }
      for (int a = 0; a < 4; ++a) {  // (A e) Aᵀ: the same on columns
        row[(4 * a + 0) * stride + l] = u[a][0];
        row[(4 * a + 1) * stride + l] = u[a][0] + u[a][1];
        row[(4 * a + 2) * stride + l] = u[a][0] - u[a][1];
        row[(4 * a + 3) * stride + l] = -u[a][1];
      }
    }
  }
}

// dW (3×3, written to g[i·3 + j]) = Gᵀ s G, s[ξ] read from in[ξ · stride].
template <typename T>
void filter_grad_tile(const T* in, long stride, T* g) {
  T u[3][4];  // Gᵀ s: rows (s0 + (s1 + s2)/2, (s1 − s2)/2, (s1 + s2)/2 + s3)
  for (int b = 0; b < 4; ++b) {
    const T s0 = in[(0 + b) * stride], s1 = in[(4 + b) * stride], s2 = in[(8 + b) * stride],
            s3 = in[(12 + b) * stride];
    u[0][b] = s0 + T(0.5) * (s1 + s2);
    u[1][b] = T(0.5) * (s1 - s2);
    u[2][b] = T(0.5) * (s1 + s2) + s3;
  }
  for (int a = 0; a < 3; ++a) {  // (Gᵀ s) G: the same on columns
    g[a * 3 + 0] = u[a][0] + T(0.5) * (u[a][1] + u[a][2]);
    g[a * 3 + 1] = T(0.5) * (u[a][1] - u[a][2]);
    g[a * 3 + 2] = T(0.5) * (u[a][1] + u[a][2]) + u[a][3];
  }
}

// V[ξ][ch][tile] for images [first, first + count) of x (n, channels, h, w); tiles numbered
// image-major, then row-major within the chunk; V[ξ] starts at v + ξ · matrix_stride.
template <typename T>
void transform_inputs(const T* x, long channels, const Tiling& t, long first, long count, T* scratch, T* v) {
  const long tiles = count * t.per_plane(), stride = matrix_stride(channels, tiles);
  for (long ch = 0; ch < channels; ++ch)  // increasing addresses (see kLanes)
    for (long i = 0; i < count; ++i) {
      const T* plane = x + ((first + i) * channels + ch) * t.h * t.w;
      input_transform(plane, t, scratch, v + ch * tiles + i * t.per_plane(), stride);
    }
}

// The forward convolution of x (n, cin, h, w) to y (n, cout, p, q) with transformed
// filters u (16 × cout × cin) and an optional bias — shared by forward and backward data.
template <typename T>
void winograd_convolve(DType dtype, const T* x, long n, long cin, const Tiling& t, const T* u, long cout, const T* bias,
                       T* y) {
  const long chunk = chunk_images(n, kTile * (cin + cout) * t.per_plane(), sizeof(T));
  const long chunks = (n + chunk - 1) / chunk, threads = omp_get_max_threads();
  const bool parallel = threads > 1 && chunks > 1;
  const long chunk_tiles = chunk * t.per_plane();
  const long slot_floats =
      kTile * (matrix_stride(cin, chunk_tiles) + matrix_stride(cout, chunk_tiles)) + 2 * scratch_floats(t);
  Tensor workspace = Tensor::empty({(parallel ? threads : 1) * slot_floats}, dtype, Device::cpu());
  T* ws = static_cast<T*>(workspace.raw_data());
#pragma omp parallel for schedule(static) if (parallel)
  for (long ck = 0; ck < chunks; ++ck) {
    const long first = ck * chunk, count = std::min(chunk, n - first), tiles = count * t.per_plane();
    const long v_stride = matrix_stride(cin, tiles), m_stride = matrix_stride(cout, tiles);
    T* v = ws + (parallel ? omp_get_thread_num() : 0) * slot_floats;  // 16 × cin × tiles
    T* m = v + kTile * v_stride;                                        // 16 × cout × tiles
    T* padded = m + kTile * m_stride;          // zero border, see place_plane
    T* rows = padded + scratch_floats(t);      // output half-rows, see output_transform
    std::fill(padded, padded + scratch_floats(t), T(0));
    transform_inputs(x, cin, t, first, count, padded, v);
    for (int xi = 0; xi < kTile; ++xi)
      product(cout, tiles, cin, u + xi * cout * cin, v + xi * v_stride, m + xi * m_stride);
    for (long i = 0; i < count; ++i)
      for (long co = 0; co < cout; ++co) {
        T* plane = y + ((first + i) * cout + co) * t.p * t.q;
        const T b = bias ? bias[co] : T(0);
        output_transform(m + co * tiles + i * t.per_plane(), m_stride, t, b, rows, plane);
      }
  }
}

}  // namespace

// x: (n, c, h, w)  w: (k, c, 3, 3)  b: (k) or null  y: (n, k, p, q)
void winograd_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  dispatch_float("conv2d_forward (winograd)", x, [&](auto tag) {
    using T = decltype(tag);
    Tensor ut = Tensor::empty({kTile * g.k * g.c}, x.dtype(), Device::cpu());
    const T* w_data = w.data<T>();
    T* u = ut.data<T>();
    for (long co = 0; co < g.k; ++co)  // U[ξ][co][ci]
      for (long ci = 0; ci < g.c; ++ci) filter_tile(w_data + (co * g.c + ci) * 9, u + co * g.c + ci, g.k * g.c);
    const T* b_data = b && b->defined() ? b->data<T>() : nullptr;
    winograd_convolve(x.dtype(), x.data<T>(), g.n, g.c, tiling(g.h, g.w, g.pad_h, g.pad_w), u, g.k, b_data,
                      y.data<T>());
  });
}

// dy: (n, k, p, q)  w: (k, c, 3, 3)  dx: (n, c, h, w)
// dx[ci] = Σ_co dy[co] ⋆ rot180(w[co, ci]) with padding 2 − pad: a forward convolution
// from k channels to c.
void winograd_backward_data(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, Tensor& dx) {
  dispatch_float("conv2d_backward_data (winograd)", dy, [&](auto tag) {
    using T = decltype(tag);
    Tensor ut = Tensor::empty({kTile * g.c * g.k}, dy.dtype(), Device::cpu());
    const T* w_data = w.data<T>();
    T* u = ut.data<T>();
    for (long co = 0; co < g.k; ++co)
      for (long ci = 0; ci < g.c; ++ci) {  // U[ξ][ci][co] of the rotated filter
        const T* f = w_data + (co * g.c + ci) * 9;
        const T rotated[9] = {f[8], f[7], f[6], f[5], f[4], f[3], f[2], f[1], f[0]};
        filter_tile(rotated, u + ci * g.k + co, g.c * g.k);
      }
    winograd_convolve(dy.dtype(), dy.data<T>(), g.n, g.k, tiling(g.p, g.q, 2 - g.pad_h, 2 - g.pad_w), u, g.c,
                      (const T*)nullptr, dx.data<T>());
  });
}

// dy: (n, k, p, q)  x: (n, c, h, w)  dw: (k, c, 3, 3)
void winograd_backward_filter(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, Tensor& dw) {
  dispatch_float("conv2d_backward_filter (winograd)", dy, [&](auto tag) {
    using T = decltype(tag);
    const Tiling t = tiling(g.h, g.w, g.pad_h, g.pad_w);
    const long chunk = chunk_images(g.n, kTile * (g.c + g.k) * t.per_plane(), sizeof(T));
    const long chunks = (g.n + chunk - 1) / chunk, threads = omp_get_max_threads();
    const bool parallel = threads > 1 && chunks > 1;
    const long slots = parallel ? threads : 1, kc = g.k * g.c;
    const long chunk_tiles = chunk * t.per_plane();
    const long slot_floats =
        kTile * (matrix_stride(g.c, chunk_tiles) + matrix_stride(g.k, chunk_tiles)) + 2 * scratch_floats(t);
    Tensor workspace = Tensor::empty({slots * slot_floats}, x.dtype(), Device::cpu());
    Tensor partial = Tensor::zeros({slots * kTile * kc}, x.dtype(), Device::cpu());
    const T *x_data = x.data<T>(), *dy_data = dy.data<T>();
    T *ws = workspace.data<T>(), *part = partial.data<T>();
#pragma omp parallel for schedule(static) if (parallel)
    for (long ck = 0; ck < chunks; ++ck) {
      const long first = ck * chunk, count = std::min(chunk, g.n - first), tiles = count * t.per_plane();
      const int slot = parallel ? omp_get_thread_num() : 0;
      const long v_stride = matrix_stride(g.c, tiles), z_stride = matrix_stride(g.k, tiles);
      T* v = ws + slot * slot_floats;  // 16 × c × tiles
      T* z = v + kTile * v_stride;     // 16 × k × tiles
      T* padded_x = z + kTile * z_stride;  // zero borders, see place_plane
      T* padded_dy = padded_x + scratch_floats(t);
      std::fill(padded_x, padded_x + 2 * scratch_floats(t), T(0));
      transform_inputs(x_data, g.c, t, first, count, padded_x, v);
      for (long co = 0; co < g.k; ++co)  // increasing addresses (see kLanes)
        for (long i = 0; i < count; ++i) {
          const T* plane = dy_data + ((first + i) * g.k + co) * g.p * g.q;
          output_grad_transform(plane, t, padded_dy, z + co * tiles + i * t.per_plane(), z_stride);
        }
      T* s = part + slot * kTile * kc;  // S[ξ] (k × c) += Z[ξ] · V[ξ]ᵀ
      for (int xi = 0; xi < kTile; ++xi)
        add_product_nt(g.k, g.c, tiles, z + xi * z_stride, v + xi * v_stride, s + xi * kc);
    }
    T* dw_data = dw.data<T>();
#pragma omp parallel for schedule(static) if (kc * kTile > kParallelGrain)
    for (long j = 0; j < kc; ++j) {  // sum the partials in slot order, then dW = Gᵀ S G
      T sum[kTile];
      for (int xi = 0; xi < kTile; ++xi) {
        sum[xi] = part[xi * kc + j];
        for (long sl = 1; sl < slots; ++sl) sum[xi] += part[(sl * kTile + xi) * kc + j];
      }
      filter_grad_tile(sum, 1, dw_data + j * 9);
    }
  });
}

}  // namespace nnlab::cpu::NNLAB_ISA
