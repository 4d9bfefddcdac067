// bfloat16 (core/bfloat16.h): the rounding a bf16 store applies (nearest, ties to even, as the
// GPU's __float2bfloat16), tensors of it (fill, casts both ways), gemm on bf16 storage, BF16 in
// safetensors and in a checkpoint loaded into a float32 model.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "apps/checkpoint.h"
#include "core/bfloat16.h"
#include "core/serialization.h"
#include "core/tensor.h"
#include "devices/registry.h"
#include "layers/zoo.h"

using namespace nnlab;

namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Values on each side of bf16's rounding decisions (bf16's ulp at 1 is 2⁻⁷), and what a bf16
// store must keep of each.
struct Rounding {
  float in, kept;
};
const Rounding kRoundings[] = {
    {1.0f + 0x1p-8f + 0x1p-10f, 1.0f + 0x1p-7f},   // past half an ulp: up (truncation gives 1)
    {1.0f + 0x1p-8f, 1.0f},                         // a tie: to the even 1
    {1.0f + 0x1p-7f + 0x1p-8f, 1.0f + 0x1p-6f},     // a tie: to the even 1 + 2⁻⁶
    {1.0f + 0x1p-8f - 0x1p-20f, 1.0f},              // just under half: down
    {-(1.0f + 0x1p-8f + 0x1p-10f), -(1.0f + 0x1p-7f)},
    {3.0f, 3.0f},                                   // exact values stay
    {0x1p-130f, 0x1p-130f},                         // a denormal is kept (the GPU's rule)
    {0x1p-133f + 0x1p-135f, 0x1p-133f},             // bf16's smallest denormal, rounded to
    {std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()},  // past bf16's largest
    {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()},
};

}  // namespace

TEST_CASE("bfloat16: a store rounds to nearest, ties to even, and keeps a NaN a NaN", "[bfloat16]") {
  for (const Rounding& r : kRoundings) {
    INFO(r.in);
    CHECK(bits_of(round_to_bf16(r.in)) == bits_of(r.kept));
    CHECK(bits_of(float(BFloat16(r.in))) == bits_of(r.kept));
  }
  CHECK(bits_of(round_to_bf16(-0.0f)) == 0x80000000u);
  // A NaN whose payload lies only in the dropped bits must not become an infinity.
  float nan_low;
  const uint32_t low_payload = 0x7f800001u;
  std::memcpy(&nan_low, &low_payload, sizeof nan_low);
  CHECK(std::isnan(round_to_bf16(nan_low)));
  CHECK(std::isnan(round_to_bf16(-std::numeric_limits<float>::quiet_NaN())));
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(-2.0f).bits == 0xc000);
}

TEST_CASE("bfloat16 tensors: fill, casts both ways, describe", "[bfloat16][tensor]") {
  std::vector<float> in;
  for (const Rounding& r : kRoundings) in.push_back(r.in);
  const Tensor x = Tensor::from_vector<float>(in, {int64_t(in.size())});
  const Tensor h = x.to(DType::BFloat16);
  CHECK(h.dtype() == DType::BFloat16);
  CHECK(h.describe() == "bfloat16[10] on cpu");
  CHECK(h.nbytes() == 20);
  const std::vector<float> back = h.to_vector<float>();
  for (size_t i = 0; i < in.size(); ++i) {
    INFO(in[i]);
    CHECK(bits_of(back[i]) == bits_of(kRoundings[i].kept));
  }
  // Back to bf16 from float, double and integers: exact where bf16 holds the value.
  CHECK(h.to(DType::Float32).to(DType::BFloat16).to_vector<float>() == h.to_vector<float>());
  CHECK(Tensor::from_vector<double>({0.5, -256.0}, {2}).to(DType::BFloat16).to_vector<float>() ==
        std::vector<float>{0.5f, -256.0f});
  CHECK(Tensor::from_vector<int32_t>({257, -3}, {2}).to(DType::BFloat16).to_vector<float>() ==
        std::vector<float>{256.0f, -3.0f});  // 257 needs 9 significant bits: a tie, to the even 256
  CHECK(Tensor::from_vector<uint8_t>({255}, {1}).to(DType::BFloat16).to_vector<float>() == std::vector<float>{255.0f});
  CHECK(Tensor::from_vector<float>({2.75f, 200.0f}, {2}).to(DType::BFloat16).to_vector<int32_t>() ==
        std::vector<int32_t>{2, 200});
  Tensor f = Tensor::full({3}, 0.1, DType::BFloat16);
  CHECK(f.to_vector<BFloat16>()[2].bits == BFloat16(0.1f).bits);
  CHECK_THROWS_WITH(f.data<float>(), Catch::Contains("tensor of bfloat16 read as float32"));
}

TEST_CASE("bfloat16 in safetensors: saved as BF16, read back bit for bit", "[bfloat16][serialization]") {
  const std::string path = "/tmp/nnlab_bf16_test_" + std::to_string(getpid()) + ".safetensors";
  const Tensor w = Tensor::from_vector<float>({1.0f, -2.0f, 1.5f, 0x1p-130f}, {2, 2}).to(DType::BFloat16);
  save_safetensors(path, {{"w", w}}, {});
  {
    std::ifstream in(path, std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(file.find("\"dtype\":\"BF16\"") != std::string::npos);
    // The data section: four little-endian 16-bit words, the last 8 bytes of the file.
    REQUIRE(file.size() >= 8);
    const std::string data = file.substr(file.size() - 8);
    CHECK(data == std::string("\x80\x3f\x00\xc0\xc0\x3f\x08\x00", 8));  // 1, −2, 1.5, 2⁻¹³⁰
  }
  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.at("w").dtype() == DType::BFloat16);
  CHECK(f.at("w").to_vector<float>() == w.to_vector<float>());
  std::remove(path.c_str());
}

TEST_CASE("bfloat16 checkpoint tensors load into a float32 model, each rounded once", "[bfloat16][checkpoint]") {
  const std::string path = "/tmp/nnlab_bf16_model_" + std::to_string(getpid()) + ".safetensors";
  const auto saved = make_model("mlp", InputSpec{}, 1);
  const auto saved_tensors = saved->named_parameters();
  std::vector<std::pair<std::string, Tensor>> halves;
  for (const auto& [name, t] : saved_tensors) halves.emplace_back(name, t.to(DType::BFloat16));
  save_safetensors(path, halves, {});
  const auto model = make_model("mlp", InputSpec{}, 2);
  load_model_tensors(load_safetensors(path), path, "mlp", *model, "mlp");
  const auto loaded = model->named_parameters();
  REQUIRE(loaded.size() == saved_tensors.size());
  for (size_t p = 0; p < loaded.size(); ++p) {
    INFO(loaded[p].first);
    REQUIRE(loaded[p].first == saved_tensors[p].first);
    CHECK(loaded[p].second.dtype() == DType::Float32);
    const std::vector<float> got = loaded[p].second.to_vector<float>();
    const std::vector<float> original = saved_tensors[p].second.to_vector<float>();
    REQUIRE(got.size() == original.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += bits_of(got[i]) != bits_of(round_to_bf16(original[i]));
    CHECK(differ == 0);
  }
  std::remove(path.c_str());
}

TEST_CASE("gemm on bf16 storage: float32 sums of exact products, a bf16 C rounded once", "[bfloat16][gemm]") {
  Backend& cpu = backend_for(Device::cpu());
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64_t m = 9, n = 17, k = 70;
    std::vector<float> av, bv;
    for (int64_t i = 0; i < m * k; ++i) av.push_back(std::sin(0.37f * float(i)) * 3.0f);
    for (int64_t i = 0; i < k * n; ++i) bv.push_back(std::cos(0.91f * float(i)) - 0.25f);
    const Tensor a = Tensor::from_vector(av, ta ? Shape{k, m} : Shape{m, k}).to(DType::BFloat16);
    const Tensor b = Tensor::from_vector(bv, tb ? Shape{n, k} : Shape{k, n}).to(DType::BFloat16);
    // The reference: the same product on the widened values, in float32.
    Tensor want = Tensor::full({m, n}, 0.75);
    cpu.gemm(ta, tb, m, n, k, 2.0, a.to(DType::Float32), b.to(DType::Float32), 0.5, want);
    Tensor c32 = Tensor::full({m, n}, 0.75), c16 = Tensor::full({m, n}, 0.75, DType::BFloat16);
    cpu.gemm(ta, tb, m, n, k, 2.0, a, b, 0.5, c32);
    cpu.gemm(ta, tb, m, n, k, 2.0, a, b, 0.5, c16);
    INFO("trans " << t);
    CHECK(c32.to_vector<float>() == want.to_vector<float>());
    CHECK(c16.dtype() == DType::BFloat16);
    CHECK(c16.to_vector<float>() == want.to(DType::BFloat16).to_vector<float>());
  }
  Tensor a16 = Tensor::zeros({2, 2}).to(DType::BFloat16), a32 = Tensor::zeros({2, 2});
  Tensor c64 = Tensor::zeros({2, 2}, DType::Float64);
  CHECK_THROWS_WITH(cpu.gemm(false, false, 2, 2, 2, 1.0, a16, a32, 0.0, a32), Catch::Contains("gemm: dtypes differ"));
  CHECK_THROWS_WITH(cpu.gemm(false, false, 2, 2, 2, 1.0, a16, a16, 0.0, c64), Catch::Contains("gemm: dtypes differ"));
}
