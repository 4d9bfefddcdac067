// The reduction ladder (--reduce-impl, devices/reduce_impl.h): each rung's CUDA kernel for the
// Linear bias gradient against the CPU's bias_backward, over shapes that reach every edge of
// the kernels (one row; columns fewer than a warp, not a multiple of 32, more than a block),
// the kernel log naming the rung, and the mlp trained with each rung from the command line.
#include "gpu/gpu_support.h"

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "cli_support.h"
#include "devices/kernel_log.h"
#include "devices/reduce_impl.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

constexpr ReduceImpl kRungs[] = {ReduceImpl::Uncoalesced, ReduceImpl::Coalesced, ReduceImpl::Tree,
                                 ReduceImpl::Shuffle};

// Selects a rung for one scope; auto again after it, whatever the test did.
struct RungScope {
  explicit RungScope(ReduceImpl rung) { set_reduce_impl(rung); }
  ~RungScope() { set_reduce_impl(ReduceImpl::Auto); }
};

// The kernel log's name of the bias reduction one bias_backward(dy, db, inner) ran.
std::string logged_bias_kernel(const Tensor& dy, Tensor& db, int64_t inner) {
  KernelLogScope log;
  gpu().bias_backward(dy, db, inner);
  const std::vector<KernelCall> calls = take_kernel_calls();
  REQUIRE(calls.size() == 1);
  return calls[0].family;
}

}  // namespace

TEST_CASE("gpu: each rung of the reduction ladder sums the bias gradient as the CPU does", "[gpu][reduce_ladder]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 10}, {64, 10}, {64, 128}, {300, 45}, {33, 300},
                                                           {1000, 1030}};
  for (const auto& [rows, c] : shapes) {
    const Tensor dy = fresh_tensor({rows, c}), act = fresh_tensor({rows, c});
    Tensor db = Tensor::empty({c}), relu_db = Tensor::empty({c}), dz = Tensor::empty({rows, c});
    cpu().bias_backward(dy, db, 1);
    cpu().relu_bias_backward(act, dy, dz, &relu_db, 1);
    const Tensor gdy = on_gpu(dy), gact = on_gpu(act);
    // The CPU adds in float32, the rungs in double: the CPU's rounding grows with the rows.
    const double atol = 1e-5 + 1e-7 * static_cast<double>(rows);
    Tensor tree_db;
    for (ReduceImpl rung : kRungs) {
      const RungScope scope(rung);
      const std::string what = std::string(reduce_impl_name(rung)) + " " + std::to_string(rows) + "×" +
                               std::to_string(c);
      Tensor gdb = Tensor::empty({c}, DType::Float32, Device::cuda(0));
      CHECK(logged_bias_kernel(gdy, gdb, 1) == "bias_backward_" + std::string(reduce_impl_name(rung)) + "_kernel");
      require_allclose(gdb, db, 1e-5, atol, what);
      // (d) adds what (c) adds, pair for pair: the same bits.
      if (rung == ReduceImpl::Tree) tree_db = gdb.to(Device::cpu());
      if (rung == ReduceImpl::Shuffle) require_equal<float>(gdb, tree_db, "shuffle against tree " + what);
      // With the ReLU: its kernel, then the rung on dz.
      Tensor gdz = Tensor::empty({rows, c}, DType::Float32, Device::cuda(0));
      gpu().relu_bias_backward(gact, gdy, gdz, &gdb, 1);
      require_equal<float>(gdz, dz, "relu_bias_backward dz " + what);
      require_allclose(gdb, relu_db, 1e-5, atol, "relu_bias_backward db " + what);
    }
  }
}

TEST_CASE("gpu: auto keeps its kernel, the ladder sums only the Linear case, the CPU refuses a rung",
          "[gpu][reduce_ladder]") {
  const Tensor dy = on_gpu(fresh_tensor({8, 16, 49}));
  Tensor db = Tensor::empty({16}, DType::Float32, Device::cuda(0));
  CHECK(logged_bias_kernel(dy, db, 49) == "bias_backward");
  const RungScope scope(ReduceImpl::Shuffle);
  CHECK(logged_bias_kernel(dy, db, 49) == "bias_backward");  // a convolution's bias: inner 49
  Tensor cpu_db = Tensor::empty({16});
  CHECK_THROWS_WITH(cpu().bias_backward(fresh_tensor({8, 16, 49}), cpu_db, 49),
                    Catch::Contains("--reduce-impl shuffle is a CUDA kernel of the reduction ladder"));
  const Tensor before = db.to(Device::cpu());
  set_reduce_impl(ReduceImpl::Auto);
  gpu().bias_backward(dy, db, 49);
  require_equal<float>(db, before, "a convolution's bias sum under --reduce-impl shuffle");
}

TEST_CASE("gpu: the mlp trains with each rung of the reduction ladder", "[gpu][reduce_ladder][cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab_reduce_ladder_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<double> auto_losses;
  for (const char* rung : {"auto", "uncoalesced", "coalesced", "tree", "shuffle"}) {
    const std::string metrics = (dir / (std::string(rung) + ".jsonl")).string();
    const nnlab_test::CliResult r = nnlab_test::run_cli(
        "train --device cuda --model mlp --batch 8 --max-steps 3 --epochs 1 --test-images 64 --metrics-every 1 "
        "--metrics " + metrics + " --reduce-impl " + rung);
    INFO(rung << ": " << r.output);
    REQUIRE(r.exit_code == 0);
    const std::vector<double> losses = nnlab_test::step_losses(metrics);
    REQUIRE(losses.size() == 3);
    if (auto_losses.empty()) auto_losses = losses;
    // Another order of the same float32 sums: the losses agree to rounding, not to the bit.
    for (size_t s = 0; s < losses.size(); ++s) CHECK(std::abs(losses[s] - auto_losses[s]) <= 1e-4 * auto_losses[s]);
  }
  // compare records the rung of each variant
  const std::string records = (dir / "compare.jsonl").string();
  const nnlab_test::CliResult compared = nnlab_test::run_cli(
      "compare --model mlp --devices cuda,cuda:reduce=tree --max-steps 2 --batch 16 --test-images 32 --metrics " +
      records);
  INFO(compared.output);
  CHECK(compared.exit_code == 0);
  CHECK_THAT(nnlab_test::read_text(records), Catch::Contains("\"reduce_impl\":\"auto\"") &&
                                                 Catch::Contains("\"reduce_impl\":\"tree\""));
  fs::remove_all(dir);
  const nnlab_test::CliResult shown = nnlab_test::run_cli("explain --model mlp --batch 8 --device cuda:reduce=shuffle");
  INFO(shown.output);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.output, Catch::Contains("bias_backward_shuffle_kernel 8×10"));
  const nnlab_test::CliResult cpu = nnlab_test::run_cli("train --device cpu --model mlp --max-steps 1 --reduce-impl tree");
  CHECK(cpu.exit_code != 0);
  CHECK_THAT(cpu.output, Catch::Contains("--reduce-impl tree is a CUDA kernel of the reduction ladder, but the device "
                                         "is cpu"));
  const nnlab_test::CliResult bad = nnlab_test::run_cli("train --device cuda --model mlp --reduce-impl warp");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.output, Catch::Contains("unknown bias reduction 'warp'"));
}
