// The GEMM ladder (devices/cuda/gemm_ladder_cuda.cu, --gemm-impl naive|tiled|registers)
// against its CPU twin, the CPU's gemm: every transpose pair, shapes that fill no tile or
// several with ragged edges, alpha and beta; the kernel log naming the rung; and the mlp
// trained a few steps from the command line on each rung, its losses beside cuBLAS's.
#include <cmath>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include "cli_support.h"
#include "devices/kernel_log.h"
#include "gpu/gpu_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

const GemmImpl kOwnRungs[] = {GemmImpl::Naive, GemmImpl::Tiled, GemmImpl::Registers};

struct Dims {
  int64_t m, n, k;
};

std::string product_name(GemmImpl rung, bool ta, bool tb, const Dims& d, double alpha, double beta) {
  return std::string("gemm ") + gemm_impl_name(rung) + " " + (ta ? "T" : "N") + (tb ? "T" : "N") + " " +
         std::to_string(d.m) + "×" + std::to_string(d.n) + "×" + std::to_string(d.k) + " alpha " +
         std::to_string(alpha) + " beta " + std::to_string(beta);
}

}  // namespace

TEST_CASE("gpu: every GEMM rung matches the CPU's gemm: transposes, ragged shapes, alpha and beta",
          "[gpu][gemm][gemm_ladder]") {
  const GemmImpl rung = GENERATE(GemmImpl::Naive, GemmImpl::Tiled, GemmImpl::Registers);
  GemmImplScope scope(rung);
  // One element; under one tile (16, and the register kernel's 64×64 and 8); k not a multiple
  // of any tile; past one tile in m and n on every rung; a long k (the mlp's first layer).
  const Dims shapes[] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {129, 257, 65}, {70, 66, 9}, {64, 10, 784}};
  struct Scale {
    double alpha, beta;
  };
  for (const Dims& d : shapes)
    for (int t = 0; t < 4; ++t)
      for (const Scale s : {Scale{1.0, 0.0}, Scale{1.5, 0.5}, Scale{-0.75, 1.0}}) {
        const bool ta = t & 1, tb = t & 2;
        const Tensor a = fresh_tensor(ta ? Shape{d.k, d.m} : Shape{d.m, d.k});
        const Tensor b = fresh_tensor(tb ? Shape{d.n, d.k} : Shape{d.k, d.n});
        Tensor c = fresh_tensor({d.m, d.n});
        Tensor gc = on_gpu(c);
        cpu().gemm(ta, tb, d.m, d.n, d.k, s.alpha, a, b, s.beta, c);
        gpu().gemm(ta, tb, d.m, d.n, d.k, s.alpha, on_gpu(a), on_gpu(b), s.beta, gc);
        require_allclose(gc, c, 1e-5, 2e-6 * static_cast<double>(d.k) + 1e-6,
                         product_name(rung, ta, tb, d, s.alpha, s.beta));
      }
}

TEST_CASE("gpu: a GEMM rung with beta = 0 never reads C, and k = 0 is C = beta·C", "[gpu][gemm][gemm_ladder]") {
  for (const GemmImpl rung : kOwnRungs) {
    GemmImplScope scope(rung);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Tensor a = fresh_tensor({19, 23}), b = fresh_tensor({23, 70});
    Tensor c = Tensor::zeros({19, 70});
    Tensor gc = on_gpu(Tensor::full({19, 70}, nan));
    cpu().gemm(false, false, 19, 70, 23, 2.0, a, b, 0.0, c);
    gpu().gemm(false, false, 19, 70, 23, 2.0, on_gpu(a), on_gpu(b), 0.0, gc);
    require_allclose(gc, c, 1e-5, 1e-4, std::string("beta 0 over NaN on ") + gemm_impl_name(rung));
    Tensor empty_k = fresh_tensor({3, 4}), g_empty_k = on_gpu(empty_k);
    cpu().gemm(false, false, 3, 4, 0, 1.0, Tensor::empty({3, 0}), Tensor::empty({0, 4}), 0.5, empty_k);
    gpu().gemm(false, false, 3, 4, 0, 1.0, on_gpu(Tensor::empty({3, 0})), on_gpu(Tensor::empty({0, 4})), 0.5,
               g_empty_k);
    require_allclose(g_empty_k, empty_k, 0, 0, std::string("k = 0 on ") + gemm_impl_name(rung));
  }
}

TEST_CASE("gpu: the kernel log names the GEMM rung with the product it computed", "[gpu][gemm][gemm_ladder]") {
  const Tensor x = fresh_tensor({8, 24}), w = fresh_tensor({16, 24});
  for (const GemmImpl rung : {GemmImpl::Cublas, GemmImpl::Naive, GemmImpl::Tiled, GemmImpl::Registers}) {
    GemmImplScope scope(rung);
    Tensor y = Tensor::empty({8, 16}, DType::Float32, Device::cuda(0));
    std::vector<KernelCall> calls;
    {
      KernelLogScope log;
      gpu().linear_forward(on_gpu(x), on_gpu(w), nullptr, y, false);  // y = x·wᵀ: NT 8×16×24
      calls = take_kernel_calls();
    }
    REQUIRE(!calls.empty());
    const std::string family = rung == GemmImpl::Cublas ? "cublasSgemm" : std::string("gemm ") + gemm_impl_name(rung);
    CHECK(calls.front().family == family);
    CHECK(calls.front().detail == "NT 8×16×24");
  }
}

// Each rung trains the mlp (its three Linear layers: every product of forward and backward)
// from the command line, its step captured as a CUDA graph as train does by default; the
// losses follow cuBLAS's within float32's drift.
TEST_CASE("gpu: nnlab train runs the mlp on every GEMM rung", "[gpu][gemm][gemm_ladder][cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab_gemm_ladder_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::vector<double>> losses;
  for (const char* rung : {"cublas", "naive", "tiled", "registers"}) {
    const std::string metrics = (dir / (std::string(rung) + ".jsonl")).string();
    const nnlab_test::CliResult r = nnlab_test::run_cli(
        std::string("train --device cuda --model mlp --batch 8 --max-steps 3 --epochs 1 --test-images 64 "
                    "--metrics-every 1 --metrics ") +
        metrics + " --gemm-impl " + rung);
    INFO(rung << ": " << r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("CUDA graphs: on"));
    losses.push_back(nnlab_test::step_losses(metrics));
    REQUIRE(losses.back().size() == 3);
  }
  fs::remove_all(dir);
  for (size_t rung = 1; rung < losses.size(); ++rung)
    for (size_t step = 0; step < 3; ++step) {
      INFO("rung " << rung << " step " << step + 1 << ": " << losses[rung][step] << " against cuBLAS's "
                   << losses[0][step]);
      CHECK(std::abs(losses[rung][step] - losses[0][step]) <= 1e-4 * std::abs(losses[0][step]) + 1e-5);
    }
}

TEST_CASE("gpu: explain shows the GEMM rung's calls, and a run variant names one",
          "[gpu][gemm][gemm_ladder][cli]") {
  const nnlab_test::CliResult tiled =
      nnlab_test::run_cli("explain --model mlp --batch 8 --device cuda --gemm-impl tiled");
  INFO(tiled.output);
  REQUIRE(tiled.exit_code == 0);
  CHECK_THAT(tiled.output, Catch::Contains("gemm tiled NT 8×256×784") &&
                               Catch::Contains("gemm tiled TN 256×784×8") && !Catch::Contains("cublasSgemm NT"));
  const nnlab_test::CliResult variant =
      nnlab_test::run_cli("compare --model mlp --devices cuda,cuda:gemm=registers --max-steps 2 --batch 8 "
                          "--test-images 32 --epochs 1");
  INFO(variant.output);
  CHECK(variant.exit_code == 0);
  const nnlab_test::CliResult on_cpu =
      nnlab_test::run_cli("compare --model mlp --devices cpu,cpu:gemm=naive --max-steps 1");
  CHECK(on_cpu.exit_code != 0);
  CHECK_THAT(on_cpu.output, Catch::Contains("--gemm-impl naive is a CUDA kernel, but the device is cpu"));
}
