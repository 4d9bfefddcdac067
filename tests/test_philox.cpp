// Philox4x32-10 against the published known-answer vectors (Random123's kat_vectors), and
// the draws built on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "core/random.h"
#include "datasets/synthetic.h"

using namespace nnlab;

namespace {
void check_kat(PhiloxBlock ctr, uint32_t k0, uint32_t k1, PhiloxBlock expected) {
  const PhiloxBlock out = philox4x32_10(ctr, k0, k1);
  for (int i = 0; i < 4; ++i) CHECK(out.v[i] == expected.v[i]);
}
}  // namespace

TEST_CASE("Philox4x32-10 matches the published known-answer vectors", "[philox]") {
  check_kat({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}});
  check_kat({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
            {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}});
  check_kat({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
            {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}});
}

TEST_CASE("philox_u32 keys draws by seed, purpose, stream and index", "[philox]") {
  // Index i reads word i % 4 of block i / 4.
  const PhiloxBlock block = philox4x32_10({{1, 0, 3, 7}}, 42, 0);
  for (int w = 0; w < 4; ++w) CHECK(philox_u32(42, 3, 7, 4 + w) == block.v[w]);
  CHECK(philox_u32(42, 3, 7, 5) != philox_u32(43, 3, 7, 5));
  CHECK(philox_u32(42, 3, 7, 5) != philox_u32(42, 4, 7, 5));
  CHECK(philox_u32(42, 3, 7, 5) != philox_u32(42, 3, 8, 5));
  // The upper half of a 64-bit seed matters too.
  CHECK(philox_u32(42, 3, 7, 5) != philox_u32(42 + (uint64_t{1} << 32), 3, 7, 5));
}

TEST_CASE("a block of draws and the draws built on blocks are the draws one index at a time", "[philox]") {
  const RandomStream rs{42, RandomPurpose::Split, 7};
  for (uint64_t b : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, (uint64_t{1} << 32) + 3}) {
    const PhiloxBlock block = rs.block(b);
    for (int w = 0; w < 4; ++w) {
      CHECK(block.v[w] == rs.u32(4 * b + w));
      CHECK(philox_block(42, static_cast<uint32_t>(RandomPurpose::Split), 7, b).v[w] == block.v[w]);
    }
  }
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{99}}) {  // draws 2i and 2i + 1
    const uint64_t hi = rs.u32(2 * i) >> 5, lo = rs.u32(2 * i + 1) >> 6;
    CHECK(rs.unit_double(i) == static_cast<double>((hi << 26) | lo) / 9007199254740992.0);
    const uint64_t r = (uint64_t{rs.u32(2 * i)} << 32) | rs.u32(2 * i + 1);
    CHECK(rs.below(i, 1000) == static_cast<uint64_t>((static_cast<unsigned __int128>(r) * 1000) >> 64));
  }
  // uniform_fill (float32): value i from draw i, also in a last block of fewer than four.
  Tensor t = Tensor::empty({7});
  uniform_fill(t, -1.0, 1.0, rs);
  const auto v = t.to_vector<float>();
  for (uint64_t i = 0; i < v.size(); ++i)
    CHECK(v[i] == static_cast<float>(-1.0 + 2.0 * static_cast<double>(u32_to_unit_float(rs.u32(i)))));
}

TEST_CASE("synthetic-cifar10's pixel i is draw i of its stream, whoever computes it", "[philox]") {
  const Dataset test = synthetic_dataset("synthetic-cifar10", "test");  // the smaller split
  REQUIRE(test.images.shape() == Shape{10000, 3, 32, 32});
  const float* x = test.images.data<float>();
  const RandomStream pixels{1234, RandomPurpose::Split, 101};
  const int64_t last = test.images.numel() - 1;
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, last / 2 + 1, last})
    CHECK(x[i] == u32_to_unit_float(pixels.u32(static_cast<uint64_t>(i))));
}

TEST_CASE("uniform fills lie in range with the right mean", "[philox]") {
  Tensor t = Tensor::empty({100000});
  uniform_fill(t, -2.0, 3.0, RandomStream{7, RandomPurpose::Init, 0});
  const auto v = t.to_vector<double>();
  double mean = 0;
  for (double x : v) {
    REQUIRE(x >= -2.0);
    REQUIRE(x < 3.0);
    mean += x / v.size();
  }
  CHECK(mean == Approx(0.5).margin(0.03));
  Tensor again = Tensor::empty({100000});
  uniform_fill(again, -2.0, 3.0, RandomStream{7, RandomPurpose::Init, 0});
  CHECK(again.to_vector<float>() == t.to_vector<float>());
}

TEST_CASE("normal fills have the right moments", "[philox]") {
  Tensor t = Tensor::empty({100001}, DType::Float64);
  normal_fill(t, 1.0, 2.0, RandomStream{3, RandomPurpose::Init, 1});
  const auto v = t.to_vector<double>();
  double mean = 0, var = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) var += (x - mean) * (x - mean) / v.size();
  CHECK(mean == Approx(1.0).margin(0.03));
  CHECK(var == Approx(4.0).epsilon(0.03));
}

TEST_CASE("random_permutation is a seeded permutation", "[philox]") {
  const auto p = random_permutation(1000, RandomStream{5, RandomPurpose::Shuffle, 0});
  std::vector<int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(p == random_permutation(1000, RandomStream{5, RandomPurpose::Shuffle, 0}));
  CHECK(p != random_permutation(1000, RandomStream{5, RandomPurpose::Shuffle, 1}));
  // Every position is reachable: over many seeds element 0 lands in many places.
  std::set<int> places;
  for (uint32_t s = 0; s < 200; ++s) {
    const auto q = random_permutation(10, RandomStream{s, RandomPurpose::Shuffle, 0});
    places.insert(static_cast<int>(std::find(q.begin(), q.end(), 0) - q.begin()));
  }
  CHECK(places.size() == 10);
}
