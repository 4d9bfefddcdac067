// The Winograd transforms of whole planes (conv2d_winograd_cpu.cpp): how a plane is tiled,
// laid out for vector loads, and sent through the 1-D transforms of conv2d_winograd_tiles.h,
// a vector of tiles at a time (lane_vectors.h: 8 float or 4 double lanes, one tile each).
//
// Only files compiled once per instruction set include this header (see even_odd.h).
#pragma once
#include <algorithm>

#include "devices/cpu/conv2d_winograd_tiles.h"
#include "devices/cpu/dispatch.h"
#include "devices/cpu/lane_vectors.h"

namespace nnlab::cpu::NNLAB_ISA {

// One plane's tiling into tiles of m × m outputs, the input tile of tile (ty, tx) starting at
// row m·ty − pad_h, column m·tx − pad_w.
struct Tiling {
  long m;                   // outputs per tile side
  long h, w, pad_h, pad_w;  // the input plane and its padding
  long p, q;                // output size
  long th, tw;              // tiles down and across
  long per_plane() const { return th * tw; }
};

inline Tiling tiling(long m, long h, long w, long pad_h, long pad_w) {
  const long p = h + 2 * pad_h - 2, q = w + 2 * pad_w - 2;
  return {m, h, w, pad_h, pad_w, p, q, (p + m - 1) / m, (q + m - 1) / m};
}

// ---- layout ----------------------------------------------------------------------------------
// Each plane is first copied into a zero-bordered buffer, so that every tile reads a full
// n × n block without bounds tests. The buffer keeps the columns apart by their remainder
// mod m (m phase planes): tile tx reads padded columns m·tx … m·tx + m + 1, that is element
// tx of every phase and element tx + 1 of phases 0 and 1, so consecutive tiles read
// consecutive floats, and a vector of tiles is one load. Results go to out[ξ · stride + tile],
// again consecutive.
//
// Rows of tiles are short (7 tiles for a 14×14 image), so rather than scalar tails every row
// runs whole groups of kLanes tiles: its last group computes up to kLanes − 1 tiles too many
// and stores them after the row, where the next row written (same plane, or the next plane:
// rows are written in increasing address order) overwrites them. Each matrix of transformed
// tiles is followed by kLanes floats of slack that take the last row's overhang.
constexpr long kLanes = 8;
static_assert(kLanes % kVectorLanes<float> == 0 && kLanes % kVectorLanes<double> == 0);

inline long round_to_lanes(long tiles) { return (tiles + kLanes - 1) / kLanes * kLanes; }
// One phase plane: m·th + 2 rows (the tiles' input rows) of round_to_lanes(tw) + 1 floats
// (phases 0 and 1 are read one element past the last tile). The input's padding (at most 2
// on each side) and the rounding of the tiles keep the plane inside them.
inline long phase_cols(const Tiling& t) { return round_to_lanes(t.tw) + 1; }
inline long phase_floats(const Tiling& t) { return (t.m * t.th + 2) * phase_cols(t); }
// Floats of scratch one plane's transform needs: its m phase planes.
inline long scratch_floats(const Tiling& t) { return t.m * phase_floats(t); }
// Distance between the n² matrices V[ξ] (rows × tiles each) in a workspace: with the slack.
inline long matrix_stride(long rows, long tiles) { return rows * tiles + kLanes; }

// Copies the h × w plane into the m phase planes at `phases` (see scratch_floats), at padded
// row `top`, padded column `left`, splitting the columns in registers. Only the plane's own
// cells are written: the border, zeroed once per kernel call, stays zero.
template <int m, typename T>
void place_plane(const T* plane, long h, long w, long top, long left, const Tiling& t, T* phases) {
  constexpr long L = kVectorLanes<T>;
  const long cols = phase_cols(t), planes = phase_floats(t);
  for (long r = 0; r < h; ++r) {
    const T* src = plane + r * w;
    T* to[m];  // input column j + k·m lands on padded column left + j + k·m
    for (int j = 0; j < m; ++j) to[j] = phases + (left + j) % m * planes + (top + r) * cols + (left + j) / m;
    for (long i = 0; i < w; i += m * L) {  // m·L columns: L of each phase
      Vector<T> block[m], phase[m];
      for (int b = 0; b < m; ++b) block[b] = load_first(src + i + b * L, w - i - b * L);
      split_phases<m>(block, phase);
      for (int j = 0; j < m; ++j) store_first(to[j] + i / m, phase[j], (w - i - j + m - 1) / m);
    }
  }
}

// ---- groups of tiles ---------------------------------------------------------------------------
// A vector's lanes take L consecutive tiles of one row. Where a row has at most L/2 tiles (a
// 16×16 plane in F(4×4, 3×3) has 4), that would leave half of every vector idle, so a group
// pairs two rows instead ("paired"): lanes [0, L/2) take row ty, lanes [L/2, L) row ty + 1.
// Either way a group is described by the first tile of each half.
struct TileAt {
  long ty, tx;
};

template <typename T>
bool pairs_rows(const Tiling& t) {
  return t.tw <= kVectorLanes<T> / 2;
}

// Whether a plane's transforms store past its own tiles: rows whose tiles do not fill whole
// groups of kLanes, or whole halves of a vector where rows are paired. Where they do not,
// planes may be transformed in any order.
template <typename T>
bool rows_overhang(const Tiling& t) {
  return pairs_rows<T>(t) ? t.tw % (kVectorLanes<T> / 2) != 0 : t.tw % kLanes != 0;
}

// Calls body(channel, image) for every plane of a chunk's `images` × `channels`: image by image,
// each image's planes one stream of memory, where no row overhangs; else channel by channel,
// in increasing addresses of the transformed tiles, so the next plane overwrites an overhang.
template <typename T, typename Body>
void for_each_plane(const Tiling& t, long images, long channels, Body body) {
  if (!rows_overhang<T>(t)) {
    for (long i = 0; i < images; ++i)
      for (long ch = 0; ch < channels; ++ch) body(ch, i);
    return;
  }
  for (long ch = 0; ch < channels; ++ch)
    for (long i = 0; i < images; ++i) body(ch, i);
}

// Calls visit(lower, upper, upper_inside) for every group of one plane, in increasing tile
// order. A pair without a second row (odd th) repeats the first (upper = lower, so reads stay
// inside the buffers), and upper_inside is false: its results are not stored.
template <bool paired, typename T, typename Visit>
void for_each_group(const Tiling& t, Visit visit) {
  constexpr long L = kVectorLanes<T>;
  if constexpr (paired) {
    for (long ty = 0; ty < t.th; ty += 2) {
      const bool inside = ty + 1 < t.th;
      visit(TileAt{ty, 0}, TileAt{inside ? ty + 1 : ty, 0}, inside);
    }
  } else {
    for (long ty = 0; ty < t.th; ++ty)
      for (long tx = 0; tx < round_to_lanes(t.tw); tx += L) visit(TileAt{ty, tx}, TileAt{ty, tx + L / 2}, true);
  }
}

// A group's vector from `lower` and `upper` (its halves' places; consecutive unless paired),
// and back.
template <bool paired, typename T>
Vector<T> load_group(const T* lower, const T* upper) {
  if constexpr (paired) return load_halves(lower, upper);
  return load(lower);
}
template <bool paired, typename T>
void store_group(T* lower, T* upper, bool upper_inside, const Vector<T>& v) {
  if constexpr (paired) return store_halves(lower, upper_inside ? upper : nullptr, v);
  store(lower, v);
}

// ---- the transforms of one plane ---------------------------------------------------------------
// V = Bᵀ d B for every tile of one plane (h × w); V[ξ] of tile (ty, tx) goes to
// out[ξ · stride + ty · tw + tx].
// placed_input_transform: the same from phase planes already in `scratch` (the pool's
// backward places them itself, conv2d_winograd_pooled.h).
template <typename Tile, bool paired, typename T>
void placed_input_transform(const Tiling& t, const T* scratch, T* out, long stride) {
  constexpr int m = Tile::m, n = Tile::n;
  const long cols = phase_cols(t), planes = phase_floats(t);
  for_each_group<paired, T>(t, [&](TileAt lower, TileAt upper, bool upper_inside) {
    const T* from[2] = {scratch + m * lower.ty * cols + lower.tx, scratch + m * upper.ty * cols + upper.tx};
    T* to[2] = {out + lower.ty * t.tw + lower.tx, out + upper.ty * t.tw + upper.tx};
    Vector<T> d[n][n], u[n][n];  // the tiles (padded rows m·ty …, columns m·tx …), then Bᵀ d
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < n; ++j) {
        const long at = j % m * planes + r * cols + j / m;
        d[r][j] = load_group<paired>(from[0] + at, from[1] + at);
      }
    for (int b = 0; b < n; ++b) Tile::data(&d[0][b], n, &u[0][b], n);  // Bᵀ d: each column
    for (int a = 0; a < n; ++a) {                                        // (Bᵀ d) B: each row
      Vector<T> v[n];
      Tile::data(u[a], 1, v, 1);
      for (int b = 0; b < n; ++b) {
        const long at = (n * a + b) * stride;
        store_group<paired>(to[0] + at, to[1] + at, upper_inside, v[b]);
      }
    }
  });
}

// Y = Aᵀ M A (+ bias) for every tile of one p × q output plane y, M[ξ] of tile (ty, tx) read
// from in[ξ · stride + ty · tw + tx]. Each output row of a group leaves the registers with
// its m phases interleaved (lane_vectors.h): the lower half's tiles are its first m/2
// vectors, the upper half's the rest. Outputs of a last tile hanging over the edge are
// computed and not stored.
template <typename Tile, bool paired, typename T>
void output_transform(const T* in, long stride, const Tiling& t, T bias, T* y) {
  constexpr int m = Tile::m, n = Tile::n;
  constexpr long L = kVectorLanes<T>;
  for_each_group<paired, T>(t, [&](TileAt lower, TileAt upper, bool upper_inside) {
    const T* from[2] = {in + lower.ty * t.tw + lower.tx, in + upper.ty * t.tw + upper.tx};
    Vector<T> c[m][n];  // Aᵀ M
    for (int b = 0; b < n; ++b) {  // each column
      Vector<T> column[n];
      for (int a = 0; a < n; ++a) {
        const long at = (n * a + b) * stride;
        column[a] = load_group<paired>(from[0] + at, from[1] + at);
      }
      Tile::output(column, 1, &c[0][b], n);
    }
    for (int a = 0; a < m; ++a) {  // (Aᵀ M) A: each row
      Vector<T> phase[m], out[m];
      Tile::output(c[a], 1, phase, 1);
      for (int j = 0; j < m; ++j) phase[j] += bias;
      merge_phases<m>(phase, out);
      for (int half = 0; half < 2; ++half) {
        const TileAt at = half ? upper : lower;
        const long row = m * at.ty + a, col = m * at.tx;
        if ((half && !upper_inside) || row >= t.p) continue;
        for (int b = 0; b < m / 2; ++b)
          store_first(y + row * t.q + col + b * L, out[half * m / 2 + b], t.q - col - b * L);
      }
    }
  });
}

// A e Aᵀ of a group's dY tiles e, stored as output_grad_transform stores them.
template <typename Tile, bool paired, typename T>
void store_grad_tiles(Vector<T> (&e)[Tile::m][Tile::m], T* const (&to)[2], bool upper_inside, long stride) {
  constexpr int m = Tile::m, n = Tile::n;
  Vector<T> u[n][m];
  for (int b = 0; b < m; ++b) Tile::output_grad(&e[0][b], m, &u[0][b], m);  // A e: each column
  for (int a = 0; a < n; ++a) {                                              // (A e) Aᵀ: each row
    Vector<T> z[n];
    Tile::output_grad(u[a], 1, z, 1);
    for (int b = 0; b < n; ++b) {
      const long at = (n * a + b) * stride;
      store_group<paired>(to[0] + at, to[1] + at, upper_inside, z[b]);
    }
  }
}

// Z = A dY Aᵀ for the m × m output-gradient tiles of one p × q plane dy (cells beyond it are
// zero); Z[ξ] of tile (ty, tx) goes to out[ξ · stride + ty · tw + tx]. The plane is split
// into phase planes as in input_transform.
template <typename Tile, bool paired, typename T>
void output_grad_transform(const T* dy, const Tiling& t, T* scratch, T* out, long stride) {
  constexpr int m = Tile::m;
  const long cols = phase_cols(t), planes = phase_floats(t);
  place_plane<m>(dy, t.p, t.q, 0, 0, t, scratch);
  for_each_group<paired, T>(t, [&](TileAt lower, TileAt upper, bool upper_inside) {
    const T* from[2] = {scratch + m * lower.ty * cols + lower.tx, scratch + m * upper.ty * cols + upper.tx};
    T* const to[2] = {out + lower.ty * t.tw + lower.tx, out + upper.ty * t.tw + upper.tx};
    Vector<T> e[m][m];  // the dY tiles (rows m·ty …, columns m·tx …)
    for (int r = 0; r < m; ++r)
      for (int j = 0; j < m; ++j) {
        const long at = j * planes + r * cols;
        e[r][j] = load_group<paired>(from[0] + at, from[1] + at);
      }
    store_grad_tiles<Tile, paired>(e, to, upper_inside, stride);
  });
}

// The three, with or without paired rows as the plane's width asks.
template <typename Tile, typename T>
void transform_placed_input(const Tiling& t, const T* scratch, T* out, long stride) {
  if (pairs_rows<T>(t)) return placed_input_transform<Tile, true>(t, scratch, out, stride);
  placed_input_transform<Tile, false>(t, scratch, out, stride);
}
template <typename Tile, typename T>
void transform_input_plane(const T* plane, const Tiling& t, T* scratch, T* out, long stride) {
  place_plane<Tile::m>(plane, t.h, t.w, t.pad_h, t.pad_w, t, scratch);
  transform_placed_input<Tile>(t, scratch, out, stride);
}
template <typename Tile, typename T>
void transform_output_plane(const T* in, long stride, const Tiling& t, T bias, T* y) {
  if (pairs_rows<T>(t)) return output_transform<Tile, true>(in, stride, t, bias, y);
  output_transform<Tile, false>(in, stride, t, bias, y);
}
template <typename Tile, typename T>
void transform_output_grad_plane(const T* dy, const Tiling& t, T* scratch, T* out, long stride) {
  if (pairs_rows<T>(t)) return output_grad_transform<Tile, true>(dy, t, scratch, out, stride);
  output_grad_transform<Tile, false>(dy, t, scratch, out, stride);
}

// ---- filters -----------------------------------------------------------------------------------
// U = G g Gᵀ of `count` 3×3 filters, a vector of them at a time: tap i (= 3·row + column) of
// filter j is tap(j, i), and its U[ξ] goes to out[ξ · stride + j]. Consecutive filters fill
// consecutive floats, so each position ξ takes one store per vector of filters (one scattered
// float per filter and position was a fifth of F(4×4)'s forward on cifar-cnn's c4: its n²
// positions, k·c floats apart, fight over the same cache sets).
// The vectors of filters are independent: spread over the threads (on the calling thread it
// was 0.1–0.2 ms of cifar-cnn's step with the other thread waiting).
template <typename Tile, typename T, typename Tap>
void transform_filters(long count, Tap tap, T* out, long stride) {
  constexpr int n = Tile::n;
  constexpr long L = kVectorLanes<T>;
#pragma omp parallel for schedule(static) if (count * n * n > kParallelGrain)
  for (long j = 0; j < count; j += L) {
    const long filters = std::min(L, count - j);
    Vector<T> g[9] = {}, u[n][3];  // the taps, lane l from filter j + l; then G g
    for (long l = 0; l < filters; ++l)
      for (int i = 0; i < 9; ++i) g[i][l] = tap(j + l, i);
    for (int c = 0; c < 3; ++c) Tile::filter(g + c, 3, &u[0][c], 3);  // each column
    for (int a = 0; a < n; ++a) {                                        // (G g) Gᵀ: each row
      Vector<T> v[n];
      Tile::filter(u[a], 1, v, 1);
      for (int b = 0; b < n; ++b) store_first(out + (a * n + b) * stride + j, v[b], filters);
    }
  }
}

// dW = Gᵀ S G of `count` filters, a vector of them at a time (as transform_filters): S[ξ] of
// filter j read from in[ξ · stride + j], consecutive filters in consecutive floats, and tap i
// (= 3·row + column) of its gradient written to out[j · 9 + i]. One filter at a time, in
// scalars, this was a sixth of F(4×4)'s filter gradient on cifar-cnn's c4 (perf, one thread).
template <typename Tile, typename T>
void filter_grad_tiles(long count, const T* in, long stride, T* out) {
  constexpr int n = Tile::n;
  constexpr long L = kVectorLanes<T>;
#pragma omp parallel for schedule(static) if (count * n * n > kParallelGrain)
  for (long j = 0; j < count; j += L) {
    const long filters = std::min(L, count - j);
    Vector<T> s[n][n], u[3][n], g[9];  // S, then Gᵀ S, then the taps, lane l from filter j + l
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) s[a][b] = load_first(in + (a * n + b) * stride + j, filters);
    for (int b = 0; b < n; ++b) Tile::filter_grad(&s[0][b], n, &u[0][b], n);  // Gᵀ S: each column
    for (int a = 0; a < 3; ++a) Tile::filter_grad(u[a], 1, g + 3 * a, 1);     // (Gᵀ S) G: each row
    for (long l = 0; l < filters; ++l)
      for (int i = 0; i < 9; ++i) out[(j + l) * 9 + i] = g[i][l];
  }
}

}  // namespace nnlab::cpu::NNLAB_ISA
