#include "core/random.h"

#include <cmath>
#include <utility>

namespace nnlab {

namespace {
// Draws 2i and 2i + 1: two words of one Philox block (draws 4⌊i/2⌋ … 4⌊i/2⌋ + 3).
std::pair<uint32_t, uint32_t> draw_pair(const RandomStream& rs, uint64_t i) {
  const PhiloxBlock b = rs.block(i >> 1);
  const int w = 2 * static_cast<int>(i & 1);
  return {b.v[w], b.v[w + 1]};
}
}  // namespace

double RandomStream::unit_double(uint64_t i) const {
  const auto [first, second] = draw_pair(*this, i);
  const uint64_t hi = first >> 5, lo = second >> 6;  // 27 + 26 = 53 bits
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

uint64_t RandomStream::below(uint64_t i, uint64_t n) const {
  const auto [first, second] = draw_pair(*this, i);
  const uint64_t r = (static_cast<uint64_t>(first) << 32) | second;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

namespace {
// Values are computed in double on the host, then converted to the tensor's dtype.
void fill_from(Tensor& t, const std::vector<double>& values) {
  Tensor host = Tensor::from_vector(values, t.shape());
  if (t.dtype() != DType::Float64) host = host.to(t.dtype());
  t.copy_(host);
}
}  // namespace

void uniform_fill(Tensor& t, double lo, double hi, const RandomStream& rs) {
  check_float("uniform_fill", t);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::Float32) {  // one 24-bit draw per value: the float32 grid of [0, 1)
    for (size_t b = 0; 4 * b < v.size(); ++b) {  // value i is draw i: four per Philox block
      const PhiloxBlock draws = rs.block(b);
      for (size_t w = 0; w < 4 && 4 * b + w < v.size(); ++w)
        v[4 * b + w] = lo + (hi - lo) * u32_to_unit_float(draws.v[w]);
    }
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = lo + (hi - lo) * rs.unit_double(i);
  }
  fill_from(t, v);
}

void normal_fill(Tensor& t, double mean, double std, const RandomStream& rs) {
  check_float("normal_fill", t);
  // Box–Muller on pairs: two uniforms give two independent normals.
  std::vector<double> v(static_cast<size_t>(t.numel()));
  const double two_pi = 6.283185307179586;
  for (size_t i = 0; i < v.size(); i += 2) {
    const double u1 = 1.0 - rs.unit_double(i), u2 = rs.unit_double(i + 1);
    const double r = std::sqrt(-2.0 * std::log(u1));
    v[i] = mean + std * r * std::cos(two_pi * u2);
    if (i + 1 < v.size()) v[i + 1] = mean + std * r * std::sin(two_pi * u2);
  }
  fill_from(t, v);
}

std::vector<int32_t> random_permutation(int64_t n, const RandomStream& rs) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rs.below(static_cast<uint64_t>(i), static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace nnlab
