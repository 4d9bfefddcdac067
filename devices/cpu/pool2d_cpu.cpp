// Pooling kernels on the CPU: max and average over k_h × k_w windows. Every (image,
// channel) plane is independent, so the loops run in parallel over the n·c planes; inside a
// plane each output reads (forward) or scatters to (backward) its own window, in a fixed
// order, so results repeat bit for bit whatever the thread count.
//
// Window of output (i, j): rows i·stride_h − pad_h ... + kernel_h − 1, clipped to [0, h)
// (columns likewise). Padded cells are never read: they cannot win a max, and an average
// counts them as zeros (count_include_pad=True, PyTorch's default). A max-pool with a fused
// ReLU (Pool2dGeometry::relu) ends each window with relu_of_window: a window whose max is
// not positive outputs 0 and records argmax −1, which no cell matches in the backward.
//
// Compiled once per instruction set (cpu_isa.h), into cpu::avx2 and cpu::avx512: the 2×2
// max-pool has its own AVX-512 loops (pool2d_2x2_avx512.h); CpuBackend's pooling methods pick
// a set (isa_dispatch.cpp).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "devices/cpu/dispatch.h"
#include "devices/cpu/even_odd.h"
#include "devices/cpu/pool2d.h"
#include "devices/cpu/pool2d_2x2_avx512.h"

namespace nnlab::cpu::NNLAB_ISA {

namespace {

// The clipped window of one output cell, plus the average's divisor: the window size with
// padded cells included but clipped at the far padded edge (as PyTorch's avg_pool2d).
struct Window {
  int64_t h0, h1, w0, w1;  // input rows [h0, h1), columns [w0, w1)
  int64_t divisor;
};

inline Window window_of(const Pool2dGeometry& g, int64_t i, int64_t j) {
  int64_t h0 = i * g.stride_h - g.pad_h, w0 = j * g.stride_w - g.pad_w;
  int64_t h1 = std::min(h0 + g.kernel_h, g.h + g.pad_h), w1 = std::min(w0 + g.kernel_w, g.w + g.pad_w);
  const int64_t divisor = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.h);
  w1 = std::min(w1, g.w);
  return {h0, h1, w0, w1, divisor};
}

bool is_2x2(const Pool2dGeometry& g) {
  return g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

// The 2×2, stride 2, unpadded window, the zoo's only max-pool, as vector loops over the
// outputs of a row. Rows are short (14 or 7 outputs in the cnn), too short for the compiler's
// loops, which leave up to 7 outputs of each row to scalar tails. So a row runs whole groups
// of kLanes outputs: its last group computes up to kLanes − 1 outputs too many, reading
// cells of the following input rows and writing after the row, where the rows written next
// (same plane, same thread) overwrite them. A plane's last rows, whose groups would reach
// beyond the plane, run the exact loop instead, so no thread writes outside its own planes.
constexpr int64_t kLanes = 8;

int64_t round_to_lanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// Output rows [0, fast) of a plane may run whole groups: the group's reads (2·q_rounded
// cells of the bottom input row) and writes (q_rounded outputs, or dx cells) stay inside
// the plane.
int64_t rows_with_whole_groups(const Pool2dGeometry& g) {
  const int64_t q_rounded = round_to_lanes(g.q);
  int64_t fast = g.p;
  while (fast > 0 && ((2 * fast - 1) * g.w + 2 * q_rounded > g.h * g.w || (fast - 1) * g.q + q_rounded > g.p * g.q))
    --fast;
  return fast;
}

// The fused ReLU after a window's max: relu(y) = y > 0 ? y : 0 (NaN → 0, as the ReLU op), and
// no winner (−1) where it gave 0, so the gradient the ReLU would stop never reaches a cell.
template <typename T>
inline void relu_of_window(T& y, int32_t& arg) {
  const bool keep = y > T(0);
  y = keep ? y : T(0);
  arg = keep ? arg : -1;
}

// x: (n, c, h, w)  y: (n, c, p, q)  argmax: int32 (n, c, p, q)
// y[i, j] = max over the window; argmax = its flat index r·w + s in the plane. The first
// maximum wins ties; a NaN wins over any number (as in PyTorch), so a NaN input shows in the
// output instead of vanishing. The four candidates are compared in the general loop's order
// (below), written as selects instead of branches: after a ReLU many windows tie at zero,
// which makes a branch unpredictable; selects cost the same whatever the data.
template <typename T>
inline void max_of_window(const T* top, const T* bottom, int32_t top_at, int32_t bottom_at, int32_t j, bool relu,
                          T& y, int32_t& arg) {
  T best = top[2 * j];
  int32_t best_at = top_at + 2 * j;
  const T b = top[2 * j + 1], c = bottom[2 * j], d = bottom[2 * j + 1];
  const bool take_b = b > best || b != b;  // a NaN wins
  best = take_b ? b : best;
  best_at = take_b ? top_at + 2 * j + 1 : best_at;
  const bool take_c = c > best || c != c;
  best = take_c ? c : best;
  best_at = take_c ? bottom_at + 2 * j : best_at;
  const bool take_d = d > best || d != d;
  best = take_d ? d : best;
  best_at = take_d ? bottom_at + 2 * j + 1 : best_at;
  if (relu) relu_of_window(best, best_at);
  y = best;
  arg = best_at;
}

template <typename T>
void maxpool_2x2_plane(const Pool2dGeometry& g, const T* xp, T* yp, int32_t* ap) {
  const int64_t fast = rows_with_whole_groups(g), q_rounded = round_to_lanes(g.q);
  for (int64_t i = 0; i < g.p; ++i) {
    const T* top = xp + 2 * i * g.w;
    const T* bottom = top + g.w;
    T* y = yp + i * g.q;
    int32_t* arg = ap + i * g.q;
    const int32_t top_at = static_cast<int32_t>(2 * i * g.w), bottom_at = top_at + static_cast<int32_t>(g.w);
    if (i < fast) {
      for (int32_t j0 = 0; j0 < q_rounded; j0 += kLanes)
#pragma omp simd
        for (int32_t j = j0; j < j0 + kLanes; ++j)
          max_of_window(top, bottom, top_at, bottom_at, j, g.relu, y[j], arg[j]);
    } else {
      for (int32_t j = 0; j < static_cast<int32_t>(g.q); ++j)
        max_of_window(top, bottom, top_at, bottom_at, j, g.relu, y[j], arg[j]);
    }
  }
}

// The backward of the 2×2 case: each input cell lies in exactly one window (h and w even,
// or the odd last row/column in none), so dx is written cell by cell — dy where the cell
// won its window, else 0 — with no zero fill and no scatter. The top and the bottom input
// row of the windows are written by separate loops: a group's extra outputs write after the
// top row, i.e. into the bottom row, which the second loop then writes properly.
template <typename T>
inline void row_gradient(const T* dy, const int32_t* arg, int32_t row_at, int32_t j, T* row) {
  const int32_t at = arg[j];
  row[2 * j] = at == row_at + 2 * j ? dy[j] : T(0);
  row[2 * j + 1] = at == row_at + 2 * j + 1 ? dy[j] : T(0);
}

template <typename T>
void maxpool_2x2_plane_backward(const Pool2dGeometry& g, const T* dyp, const int32_t* ap, T* dxp) {
  const int64_t fast = rows_with_whole_groups(g), q_rounded = round_to_lanes(g.q);
  for (int64_t i = 0; i < g.p; ++i) {
    const T* dy = dyp + i * g.q;
    const int32_t* arg = ap + i * g.q;
    for (int half = 0; half < 2; ++half) {  // top row first (see above)
      T* row = dxp + (2 * i + half) * g.w;
      const int32_t row_at = static_cast<int32_t>((2 * i + half) * g.w);
      if (i < fast) {
        for (int32_t j0 = 0; j0 < q_rounded; j0 += kLanes)
#pragma omp simd
          for (int32_t j = j0; j < j0 + kLanes; ++j) row_gradient(dy, arg, row_at, j, row);
      } else {
        for (int32_t j = 0; j < static_cast<int32_t>(g.q); ++j) row_gradient(dy, arg, row_at, j, row);
      }
      if (g.w % 2) row[g.w - 1] = T(0);  // the odd last column is in no window
    }
  }
  if (g.h % 2) std::fill(dxp + (g.h - 1) * g.w, dxp + g.h * g.w, T(0));  // nor the odd last row
}


template <typename T>
void maxpool_forward_typed(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& a) {
  const T* x_data = static_cast<const T*>(x.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  int32_t* a_data = static_cast<int32_t*>(a.raw_data());
  const long planes = static_cast<long>(g.n * g.c);
  if (is_2x2(g)) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      if (row_groups_apply(g)) return maxpool_2x2_row_groups(g, x_data, y_data, a_data);
#endif
#pragma omp parallel for schedule(static) if (planes * g.h * g.w > kParallelGrain)
    for (long pl = 0; pl < planes; ++pl)
      maxpool_2x2_plane(g, x_data + pl * g.h * g.w, y_data + pl * g.p * g.q, a_data + pl * g.p * g.q);
    return;
  }
#pragma omp parallel for schedule(static) if (planes * g.p * g.q * g.kernel_h * g.kernel_w > kParallelGrain)
  for (long pl = 0; pl < planes; ++pl) {
    const T* xp = x_data + pl * g.h * g.w;
    T* yp = y_data + pl * g.p * g.q;
    int32_t* ap = a_data + pl * g.p * g.q;
    for (int64_t i = 0; i < g.p; ++i) {
      for (int64_t j = 0; j < g.q; ++j) {
        const Window win = window_of(g, i, j);
        T best = -INFINITY;
        int32_t best_at = static_cast<int32_t>(win.h0 * g.w + win.w0);
        for (int64_t r = win.h0; r < win.h1; ++r) {
          for (int64_t s = win.w0; s < win.w1; ++s) {
            const T v = xp[r * g.w + s];
            if (v > best || std::isnan(v)) {
              best = v;
              best_at = static_cast<int32_t>(r * g.w + s);
            }
          }
        }
        if (g.relu) relu_of_window(best, best_at);
        yp[i * g.q + j] = best;
        ap[i * g.q + j] = best_at;
      }
    }
  }
}

// dy: (n, c, p, q)  argmax: int32 (n, c, p, q)  dx: (n, c, h, w)
// dx[argmax[i, j]] += dy[i, j]: only the winner of each window receives its gradient (none
// where argmax is −1, a window the fused ReLU zeroed).
template <typename T>
void maxpool_backward_typed(const Pool2dGeometry& g, const Tensor& dy, const Tensor& a, const Tensor& dx) {
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  const int32_t* a_data = static_cast<const int32_t*>(a.raw_data());
  T* dx_data = static_cast<T*>(dx.raw_data());
  const long planes = static_cast<long>(g.n * g.c);
  if (is_2x2(g)) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>)
      if (row_groups_apply(g)) return maxpool_2x2_row_groups_backward(g, dy_data, a_data, dx_data);
#endif
#pragma omp parallel for schedule(static) if (planes * g.h * g.w > kParallelGrain)
    for (long pl = 0; pl < planes; ++pl)
      maxpool_2x2_plane_backward(g, dy_data + pl * g.p * g.q, a_data + pl * g.p * g.q, dx_data + pl * g.h * g.w);
    return;
  }
#pragma omp parallel for schedule(static) if (planes * g.h * g.w > kParallelGrain)
  for (long pl = 0; pl < planes; ++pl) {
    T* dxp = dx_data + pl * g.h * g.w;
    std::fill(dxp, dxp + g.h * g.w, T(0));
    const T* dyp = dy_data + pl * g.p * g.q;
    const int32_t* ap = a_data + pl * g.p * g.q;
    for (int64_t o = 0; o < g.p * g.q; ++o)
      if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
  }
}

// x: (n, c, h, w)  y: (n, c, p, q)     y[i, j] = (Σ over the window of x) / divisor
template <typename T>
void avgpool_forward_typed(const Pool2dGeometry& g, const Tensor& x, const Tensor& y) {
  const T* x_data = static_cast<const T*>(x.raw_data());
  T* y_data = static_cast<T*>(y.raw_data());
  const long planes = static_cast<long>(g.n * g.c);
#pragma omp parallel for schedule(static) if (planes * g.p * g.q * g.kernel_h * g.kernel_w > kParallelGrain)
  for (long pl = 0; pl < planes; ++pl) {
    const T* xp = x_data + pl * g.h * g.w;
    T* yp = y_data + pl * g.p * g.q;
    for (int64_t i = 0; i < g.p; ++i) {
      for (int64_t j = 0; j < g.q; ++j) {
        const Window win = window_of(g, i, j);
        T sum = 0;
        for (int64_t r = win.h0; r < win.h1; ++r)
          for (int64_t s = win.w0; s < win.w1; ++s) sum += xp[r * g.w + s];
        yp[i * g.q + j] = sum / static_cast<T>(win.divisor);
      }
    }
  }
}

// dy: (n, c, p, q)  dx: (n, c, h, w)   dx[r, s] = Σ over the windows holding (r, s) of dy / divisor
template <typename T>
void avgpool_backward_typed(const Pool2dGeometry& g, const Tensor& dy, const Tensor& dx) {
  const T* dy_data = static_cast<const T*>(dy.raw_data());
  T* dx_data = static_cast<T*>(dx.raw_data());
  const long planes = static_cast<long>(g.n * g.c);
#pragma omp parallel for schedule(static) if (planes * g.p * g.q * g.kernel_h * g.kernel_w > kParallelGrain)
  for (long pl = 0; pl < planes; ++pl) {
    T* dxp = dx_data + pl * g.h * g.w;
    std::fill(dxp, dxp + g.h * g.w, T(0));
    const T* dyp = dy_data + pl * g.p * g.q;
    for (int64_t i = 0; i < g.p; ++i) {
      for (int64_t j = 0; j < g.q; ++j) {
        const Window win = window_of(g, i, j);
        const T share = dyp[i * g.q + j] / static_cast<T>(win.divisor);
        for (int64_t r = win.h0; r < win.h1; ++r)
          for (int64_t s = win.w0; s < win.w1; ++s) dxp[r * g.w + s] += share;
      }
    }
  }
}

}  // namespace

void maxpool_2x2_one_plane(const Pool2dGeometry& g, const float* x, float* y, int32_t* argmax) {
  maxpool_2x2_plane(g, x, y, argmax);
}
void maxpool_2x2_one_plane(const Pool2dGeometry& g, const double* x, double* y, int32_t* argmax) {
  maxpool_2x2_plane(g, x, y, argmax);
}
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const float* dy, const int32_t* argmax, float* dx) {
  maxpool_2x2_plane_backward(g, dy, argmax, dx);
}
void maxpool_2x2_one_plane_backward(const Pool2dGeometry& g, const double* dy, const int32_t* argmax, double* dx) {
  maxpool_2x2_plane_backward(g, dy, argmax, dx);
}

void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax) {
  dispatch_float("maxpool2d_forward", x, [&](auto t) { maxpool_forward_typed<decltype(t)>(g, x, y, argmax); });
}

void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  dispatch_float("maxpool2d_backward", dy, [&](auto t) { maxpool_backward_typed<decltype(t)>(g, dy, argmax, dx); });
}

void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y) {
  dispatch_float("avgpool2d_forward", x, [&](auto t) { avgpool_forward_typed<decltype(t)>(g, x, y); });
}

void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx) {
  dispatch_float("avgpool2d_backward", dy, [&](auto t) { avgpool_backward_typed<decltype(t)>(g, dy, dx); });
}

}  // namespace nnlab::cpu::NNLAB_ISA
