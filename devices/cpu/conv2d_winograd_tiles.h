// The two Winograd algorithms of the CPU's 3×3 convolutions (conv2d_winograd_cpu.cpp),
// F(2×2, 3×3) and F(4×4, 3×3), written as their 1-D transforms (Lavin & Gray 2015).
//
// F(m, 3) computes m outputs of a 3-tap correlation, y[i] = Σ_j d[i + j] · g[j], from an
// input tile of n = m + 2 values with n multiplies instead of 3m:
//   y = Aᵀ [ (G g) ⊙ (Bᵀ d) ]          Bᵀ: n × n,  G: n × 3,  Aᵀ: m × n
// Nesting it (rows, then columns) gives the 2-D algorithm on an n × n tile:
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A   m² outputs for n² multiplies (F(2,3): 16 for 4;
//                                      F(4,3): 36 for 16, 2.25 a output against 4)
// and every 2-D transform below is a 1-D one applied to each column, then to each row.
//
// The larger tile saves more multiplies, but its transforms multiply by 4, 5 and 8, so a
// float32 result carries more rounding error (worst about 4e-6 of the values' scale against
// F(2×2)'s 2e-7; tests/test_conv_winograd.cpp bounds both), and a small plane wastes more of
// its last tile row and column. conv2d_cpu.cpp chooses per layer.
//
// Each struct gives, for a vector read at in[i · is] and written to out[i · os]:
//   data         Bᵀ  n → n   an input tile
//   filter       G   3 → n   a filter
//   output       Aᵀ  n → m   the products back to outputs
//   output_grad  A   m → n   an output-gradient tile (backward filter: ∂L/∂g = Gᵀ S G with
//   filter_grad  Gᵀ  n → 3   S = Σ_tiles (A dY Aᵀ) ⊙ (Bᵀ d B), see conv2d_winograd_cpu.cpp)
//
// Only files compiled once per instruction set include this header (see even_odd.h for why
// its inline functions live in their namespace).
#pragma once
#include <type_traits>

#ifndef NNLAB_ISA
#error "conv2d_winograd_tiles.h belongs to the kernels compiled once per instruction set (NNLAB_ISA)"
#endif

namespace nnlab::cpu::NNLAB_ISA {

// The transforms run on one float or double, or on a vector of them (a GCC vector type: one
// tile per lane, conv2d_winograd_cpu.cpp); Element<V> is the scalar their constants take.
template <typename V>
auto element_of() {
  if constexpr (std::is_arithmetic_v<V>)
    return V{};
  else
    return V{}[0];
}
template <typename V>
using Element = decltype(element_of<V>());

// F(2, 3), interpolation points 0, 1, −1, ∞:
//        ⎡1  0 -1  0⎤        ⎡ 1    0    0 ⎤
//   Bᵀ = ⎢0  1  1  0⎥   G =  ⎢1/2  1/2  1/2⎥   Aᵀ = ⎡1  1  1  0⎤
//        ⎢0 -1  1  0⎥        ⎢1/2 -1/2  1/2⎥        ⎣0  1 -1 -1⎦
//        ⎣0  1  0 -1⎦        ⎣ 0    0    1 ⎦
struct WinogradF2 {
  static constexpr int m = 2, n = 4;

  template <typename T>
  static void data(const T* d, int is, T* out, int os) {
    const T d0 = d[0], d1 = d[is], d2 = d[2 * is], d3 = d[3 * is];
    out[0] = d0 - d2;
    out[os] = d1 + d2;
    out[2 * os] = d2 - d1;
    out[3 * os] = d1 - d3;
  }
  template <typename T>
  static void filter(const T* g, int is, T* out, int os) {
    using S = Element<T>;
    const T g0 = g[0], g1 = g[is], g2 = g[2 * is];
    out[0] = g0;
    out[os] = S(0.5) * (g0 + g1 + g2);
    out[2 * os] = S(0.5) * (g0 - g1 + g2);
    out[3 * os] = g2;
  }
  template <typename T>
  static void output(const T* s, int is, T* out, int os) {
    const T s0 = s[0], s1 = s[is], s2 = s[2 * is], s3 = s[3 * is];
    out[0] = s0 + s1 + s2;
    out[os] = s1 - s2 - s3;
  }
  template <typename T>
  static void output_grad(const T* e, int is, T* out, int os) {
    const T e0 = e[0], e1 = e[is];
    out[0] = e0;
    out[os] = e0 + e1;
    out[2 * os] = e0 - e1;
    out[3 * os] = -e1;
  }
  template <typename T>
  static void filter_grad(const T* s, int is, T* out, int os) {
    using S = Element<T>;
    const T s0 = s[0], s1 = s[is], s2 = s[2 * is], s3 = s[3 * is];
    out[0] = s0 + S(0.5) * (s1 + s2);
    out[os] = S(0.5) * (s1 - s2);
    out[2 * os] = S(0.5) * (s1 + s2) + s3;
  }
};

// F(4, 3), interpolation points 0, 1, −1, 2, −2, ∞:
//        ⎡4  0 -5  0  1  0⎤        ⎡ 1/4    0     0  ⎤
//        ⎢0 -4 -4  1  1  0⎥        ⎢-1/6  -1/6  -1/6 ⎥        ⎡1  1  1  1  1  0⎤
//   Bᵀ = ⎢0  4 -4 -1  1  0⎥   G =  ⎢-1/6   1/6  -1/6 ⎥   Aᵀ = ⎢0  1 -1  2 -2  0⎥
//        ⎢0 -2 -1  2  1  0⎥        ⎢1/24  1/12   1/6 ⎥        ⎢0  1  1  4  4  0⎥
//        ⎢0  2 -1 -2  1  0⎥        ⎢1/24 -1/12   1/6 ⎥        ⎣0  1 -1  8 -8  1⎦
//        ⎣0  4  0 -5  0  1⎦        ⎣  0     0     1  ⎦
// Shared sums (d4 − d2, d3 − d1, ...) keep each transform to a few adds and multiplies.
struct WinogradF4 {
  static constexpr int m = 4, n = 6;

  template <typename T>
  static void data(const T* d, int is, T* out, int os) {
    using S = Element<T>;
    const T d0 = d[0], d1 = d[is], d2 = d[2 * is], d3 = d[3 * is], d4 = d[4 * is], d5 = d[5 * is];
    const T sum_out = d4 - S(4) * d2, sum_in = d3 - S(4) * d1;  // rows 1, 2: (d4 − 4d2) ± (d3 − 4d1)
    const T far = d4 - d2, near = S(2) * (d3 - d1);              // rows 3, 4: (d4 − d2) ± 2(d3 − d1)
    out[0] = S(4) * d0 - S(5) * d2 + d4;
    out[os] = sum_out + sum_in;
    out[2 * os] = sum_out - sum_in;
    out[3 * os] = far + near;
    out[4 * os] = far - near;
    out[5 * os] = S(4) * d1 - S(5) * d3 + d5;
  }
  template <typename T>
  static void filter(const T* g, int is, T* out, int os) {
    using S = Element<T>;
    const T g0 = g[0], g1 = g[is], g2 = g[2 * is];
    const T outer = g0 + g2;
    out[0] = S(0.25) * g0;
    out[os] = S(-1.0 / 6) * (outer + g1);
    out[2 * os] = S(-1.0 / 6) * (outer - g1);
    const T even = S(1.0 / 24) * g0 + S(1.0 / 6) * g2, odd = S(1.0 / 12) * g1;
    out[3 * os] = even + odd;
    out[4 * os] = even - odd;
    out[5 * os] = g2;
  }
  template <typename T>
  static void output(const T* s, int is, T* out, int os) {
    using S = Element<T>;
    const T s0 = s[0], s1 = s[is], s2 = s[2 * is], s3 = s[3 * is], s4 = s[4 * is], s5 = s[5 * is];
    const T plus1 = s1 + s2, minus1 = s1 - s2, plus2 = s3 + s4, minus2 = s3 - s4;
    out[0] = s0 + plus1 + plus2;
    out[os] = minus1 + S(2) * minus2;
    out[2 * os] = plus1 + S(4) * plus2;
    out[3 * os] = minus1 + S(8) * minus2 + s5;
  }
  template <typename T>
  static void output_grad(const T* e, int is, T* out, int os) {
    using S = Element<T>;
    const T e0 = e[0], e1 = e[is], e2 = e[2 * is], e3 = e[3 * is];
    const T even1 = e0 + e2, odd1 = e1 + e3;                       // at ±1
    const T even2 = e0 + S(4) * e2, odd2 = S(2) * e1 + S(8) * e3;  // at ±2
    out[0] = e0;
    out[os] = even1 + odd1;
    out[2 * os] = even1 - odd1;
    out[3 * os] = even2 + odd2;
    out[4 * os] = even2 - odd2;
    out[5 * os] = e3;
  }
  template <typename T>
  static void filter_grad(const T* s, int is, T* out, int os) {
    using S = Element<T>;
    const T s0 = s[0], s1 = s[is], s2 = s[2 * is], s3 = s[3 * is], s4 = s[4 * is], s5 = s[5 * is];
    const T plus1 = s1 + s2, minus1 = s1 - s2, plus2 = s3 + s4, minus2 = s3 - s4;
    out[0] = S(0.25) * s0 - S(1.0 / 6) * plus1 + S(1.0 / 24) * plus2;
    out[os] = S(-1.0 / 6) * minus1 + S(1.0 / 12) * minus2;
    out[2 * os] = S(-1.0 / 6) * plus1 + S(1.0 / 6) * plus2 + s5;
  }
};

}  // namespace nnlab::cpu::NNLAB_ISA
