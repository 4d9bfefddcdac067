// The teaching convolution against the fast path, the kernel log, and `nnlab explain` end to
// end: it lists forward and backward nodes with the kernel calls of the implementation that
// was actually selected, and refuses devices and implementations it cannot run.
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <catch2/catch.hpp>

#include "cli_support.h"
#include <cmath>
#include <cstdio>
#include <string>

#include "autograd/ops.h"
#include "core/random.h"
#include "devices/conv_impl.h"
#include "devices/gemm_impl.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::random_tensor;

using nnlab_test::run_cli;
using nnlab_test::CliResult;
using nnlab_test::read_text;
using nnlab_test::count_of;

namespace {

// The seed of every random tensor in this file.
constexpr uint64_t kExplainSeed = 42;

// Restores the process-wide convolution choice however a test section ends.
struct ConvImplGuard {
  ~ConvImplGuard() { set_conv_impl(ConvImpl::Auto); }
};

// max |a − b| / max |b|, in double, over two tensors of one shape.
double relative_max_error(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::Float64), y = b.to(DType::Float64);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    diff = std::max(diff, std::fabs(x.data<double>()[i] - y.data<double>()[i]));
    scale = std::max(scale, std::fabs(y.data<double>()[i]));
  }
  return diff / std::max(scale, 1e-30);
}

struct ConvGrads {
  Tensor y, dx, dw, db;
};

// Forward and backward of one convolution with the selected implementation; the output
// gradient is a fixed random tensor so that every element of dy differs.
ConvGrads run_conv(ConvImpl impl, const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t pad) {
  set_conv_impl(impl);
  for (const Tensor* t : {&x, &w, &b}) const_cast<Tensor*>(t)->set_grad(Tensor());
  Tensor y = conv2d(x, w, b, stride, stride, pad, pad);
  const Tensor dy = random_tensor(y.shape(), kExplainSeed, 99, y.dtype());
  sum(mul(y, dy)).backward();
  return {y, x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("reference convolution equals im2col on random shapes, float64 and float32", "[explain]") {
  ConvImplGuard guard;
  struct Case {
    int64_t n, c, h, w, k, r, s, stride, pad;
  };
  const Case cases[] = {{2, 3, 7, 6, 4, 3, 3, 1, 1}, {1, 2, 9, 9, 3, 5, 5, 2, 2}, {3, 1, 5, 8, 2, 1, 3, 1, 0},
                        {2, 4, 6, 6, 5, 3, 2, 2, 0}, {1, 3, 4, 4, 2, 4, 4, 1, 1}};
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    const double tolerance = dtype == DType::Float64 ? 1e-10 : 1e-4;
    uint32_t stream = 0;
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype), c.n, c.c, c.h, c.w, c.k, c.r, c.s, c.stride, c.pad);
      const Tensor x = random_tensor({c.n, c.c, c.h, c.w}, kExplainSeed, stream++, dtype).set_requires_grad(true);
      const Tensor w = random_tensor({c.k, c.c, c.r, c.s}, kExplainSeed, stream++, dtype).set_requires_grad(true);
      const Tensor b = random_tensor({c.k}, kExplainSeed, stream++, dtype).set_requires_grad(true);
      const ConvGrads ref = run_conv(ConvImpl::Reference, x, w, b, c.stride, c.pad);
      const ConvGrads fast = run_conv(ConvImpl::Im2col, x, w, b, c.stride, c.pad);
      REQUIRE(ref.y.shape() == fast.y.shape());
      CHECK(relative_max_error(ref.y, fast.y) < tolerance);
      CHECK(relative_max_error(ref.dx, fast.dx) < tolerance);
      CHECK(relative_max_error(ref.dw, fast.dw) < tolerance);
      CHECK(relative_max_error(ref.db, fast.db) < tolerance);
    }
  }
}

TEST_CASE("cudnn cannot be selected on the CPU, and the old names of auto are refused", "[explain]") {
  ConvImplGuard guard;
  const Tensor x = random_tensor({1, 1, 4, 4}, kExplainSeed, 1, DType::Float32).set_requires_grad(true);
  const Tensor w = random_tensor({1, 1, 3, 3}, kExplainSeed, 2, DType::Float32).set_requires_grad(true);
  set_conv_impl(ConvImpl::Cudnn);
  REQUIRE_THROWS_WITH(conv2d(x, w, Tensor(), 1, 1, 0, 0), Catch::Contains("cudnn runs on CUDA only"));
  REQUIRE_THROWS_WITH(parse_conv_impl("fft"), Catch::Contains("unknown convolution implementation 'fft'"));
  // The old names of auto are refused with the new one, not kept as aliases.
  REQUIRE_THROWS_WITH(parse_conv_impl("winograd"), Catch::Contains("--conv-impl winograd is now called auto"));
  REQUIRE_THROWS_WITH(parse_conv_impl("fast"), Catch::Contains("--conv-impl fast is now called auto"));
  CHECK(parse_conv_impl("auto") == ConvImpl::Auto);
}

// The GEMM ladder's rungs are CUDA kernels: on the CPU each is refused with one message, by
// train, explain and a run variant alike, before anything runs.
TEST_CASE("the GEMM ladder (--gemm-impl) is CUDA's: refused on the CPU, and unknown names refused", "[explain]") {
  CHECK(parse_gemm_impl("cublas") == GemmImpl::Cublas);
  CHECK(parse_gemm_impl("registers") == GemmImpl::Registers);
  CHECK(std::string(gemm_impl_name(parse_gemm_impl("tiled"))) == "tiled");
  REQUIRE_THROWS_WITH(parse_gemm_impl("strassen"), Catch::Contains("unknown GEMM 'strassen'"));
  CHECK_NOTHROW(check_gemm_impl(GemmImpl::Cublas, Device::cpu()));
  REQUIRE_THROWS_WITH(check_gemm_impl(GemmImpl::Naive, Device::cpu()),
                      Catch::Contains("--gemm-impl naive is a CUDA kernel, but the device is cpu"));
  const std::string refused = "--gemm-impl tiled is a CUDA kernel, but the device is cpu";
  const CliResult train = run_cli("train --device cpu --model mlp --max-steps 1 --gemm-impl tiled");
  CHECK(train.exit_code == 1);
  CHECK_THAT(train.output, Catch::Contains(refused));
  const CliResult explain = run_cli("explain --model mlp --batch 2 --device cpu:gemm=tiled");
  CHECK(explain.exit_code == 1);
  CHECK_THAT(explain.output, Catch::Contains(refused));
  const CliResult sgemm = run_cli("sgemm --device cpu --gemm-impl tiled");
  CHECK(sgemm.exit_code == 1);
  CHECK_THAT(sgemm.output, Catch::Contains(refused));
}

TEST_CASE("the kernel log records BLAS calls only while it is on", "[explain]") {
  const Tensor a = random_tensor({3, 5}, kExplainSeed, 3, DType::Float32).set_requires_grad(true);
  const Tensor b = random_tensor({5, 2}, kExplainSeed, 4, DType::Float32).set_requires_grad(true);
  const Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64);
  take_kernel_calls();
  matmul(a, b);
  CHECK(take_kernel_calls().empty());
  {
    KernelLogScope log;
    matmul(a, b);
    const std::vector<KernelCall> calls = take_kernel_calls();
    REQUIRE(calls.size() == 1);
    // Float32 products of layer size go to libxsmm when nnlab has it (gemm_libxsmm.h).
    CHECK((calls[0].family == "libxsmm" || calls[0].family == "cblas_sgemm"));
    CHECK(calls[0].detail == "NN 3×2×5");
    // Float64 always goes to OpenBLAS.
    matmul(a64, b64);
    const std::vector<KernelCall> doubles = take_kernel_calls();
    REQUIRE(doubles.size() == 1);
    CHECK(doubles[0].family == "cblas_dgemm");
    CHECK(doubles[0].detail == "NN 3×2×5");
  }
  CHECK_FALSE(kernel_log_enabled());
}

TEST_CASE("nnlab explain lists forward and backward nodes with the selected convolution's kernels", "[explain]") {
  // These check the kernels named, not times: 3 steps behind each median instead of 21 (under
  // the sanitizers the reference convolutions' 44 steps took 10 s).
  const CliResult ref = run_cli("explain --model cnn --batch 2 --threads 1 --conv-impl reference --repeats 3");
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  CHECK(ref.output.find("fwd  c1+pool1+relu1 Conv2d") != std::string::npos);
  CHECK(ref.output.find("bwd  c2+pool2+relu2 Conv2d") != std::string::npos);
  CHECK(ref.output.find("reference conv2d fwd x 2×1×28×28 w 32×1×3×3 s1 p1: the definition as loops") !=
        std::string::npos);
  CHECK(ref.output.find("reference conv2d bwd filter x 2×32×14×14 w 64×32×3×3 s1 p1") != std::string::npos);
  CHECK(ref.output.find("im2col") == std::string::npos);
  // f1's forward: small_gemm_nt's dot products with AVX-512, else libxsmm (devices/cpu/gemm_cpu.cpp)
  CHECK(ref.output.find(" NT 2×128×3136") != std::string::npos);
  CHECK(ref.output.find("share of time per op family") != std::string::npos);
  CHECK(ref.output.find("measured sgemm peak") != std::string::npos);
  CHECK(ref.output.find("medians of 3 steps") != std::string::npos);

  const CliResult fast = run_cli("explain --model cnn --batch 2 --threads 1 --conv-impl im2col --repeats 3");
  INFO(fast.output);
  REQUIRE(fast.exit_code == 0);
  CHECK(fast.output.find("im2col+small_gemm conv2d fwd x 2×1×28×28 w 32×1×3×3 s1 p1: small_gemm NN 32×784×9 ×2 "
                         "images") != std::string::npos);
  CHECK(fast.output.find("small_gemm NN 64×196×288 ×2 images") != std::string::npos);  // c2 forward, per image
  CHECK(fast.output.find("reference conv2d") == std::string::npos);
  CHECK(fast.output.find("winograd") == std::string::npos);

  // The default, auto: the CPU's own choice per layer, named under each layer.
  const CliResult automatic = run_cli("explain --model cnn --batch 2 --threads 1 --repeats 3");
  INFO(automatic.output);
  REQUIRE(automatic.exit_code == 0);
  CHECK(automatic.output.find("im2col+small_gemm conv2d fwd x 2×1×28×28 w 32×1×3×3 s1 p1") != std::string::npos);
  CHECK(automatic.output.find("winograd conv2d fwd x 2×32×14×14 w 64×32×3×3 s1 p1") != std::string::npos);
  CHECK(automatic.output.find("winograd conv2d bwd filter x 2×32×14×14") != std::string::npos);
  CHECK(automatic.output.find("im2col+small_gemm conv2d bwd filter x 2×1×28×28") != std::string::npos);
  // Each plan says why it was chosen: the rule in conv2d_plan.cpp, in words.
  CHECK(automatic.output.find("F(2×2,3×3), 16 products per image chunk (why: 3×3, stride 1, ≥ 8 channels in and "
                              "out") != std::string::npos);

  // "What runs for lenet5's c1 backward on the CPU, and why?" (docs/cpu-kernels.md)
  const CliResult lenet = run_cli("explain --model lenet5 --batch 64 --threads 1 --repeats 3");
  INFO(lenet.output);
  REQUIRE(lenet.exit_code == 0);
  CHECK(lenet.output.find("fuse_epilogues: c1+pool1+relu1, c2+pool2+relu2, f1+relu3, f2+relu4 each run as one op") !=
        std::string::npos);
  CHECK(lenet.output.find("direct conv2d bwd filter x 64×1×28×28 w 6×1×5×5 s1 p2: images in the vector lanes (why: "
                          "stride 1, ≤ 7 input channels, ≥ 25 taps: too shallow for im2col + GEMM to pay; 16 images "
                          "fill the lanes within 1 MB; unpools the gradient plane by plane)") != std::string::npos);
}

TEST_CASE("nnlab explain refuses what it cannot run", "[explain]") {
  const CliResult unknown = run_cli("explain --model mlp --device tpu");
  CHECK(unknown.exit_code != 0);
  const CliResult no_steps = run_cli("explain --model mlp --repeats 0");
  CHECK(no_steps.exit_code == 1);
  CHECK(no_steps.output.find("--repeats must lie in 1..10000, got 0") != std::string::npos);
  CHECK(unknown.output.find("unknown device 'tpu'") != std::string::npos);
  const CliResult fp16 = run_cli("explain --model mlp --precision fp16");
  CHECK(fp16.exit_code != 0);
  CHECK(fp16.output.find("--precision must be fp32 or bf16, got 'fp16'") != std::string::npos);
  const CliResult tf32 = run_cli("explain --model mlp --device cpu:precision=tf32");
  CHECK(tf32.exit_code != 0);
  CHECK(tf32.output.find("write cpu:math=tf32") != std::string::npos);
  const CliResult cudnn = run_cli("explain --model cnn --conv-impl cudnn --batch 1");
  CHECK(cudnn.exit_code != 0);
  CHECK(cudnn.output.find("cudnn runs on CUDA only") != std::string::npos);
  if (!cuda_status().usable) {
    const CliResult cuda = run_cli("explain --model mlp --device cuda");
    CHECK(cuda.exit_code != 0);
    CHECK(cuda.output.find("device 'cuda': CUDA is not usable here") != std::string::npos);
    // Side by side, the CPU half still runs and the missing GPU is explained.
    const CliResult both = run_cli("explain --model mlp --batch 2 --threads 1 --device cpu,cuda");
    CHECK(both.exit_code == 0);
    CHECK(both.output.find("cuda: not usable: ") != std::string::npos);
    CHECK(both.output.find("bwd  fc1+relu1   Linear") != std::string::npos);
  }
}

// A bf16 step as train's --precision bf16 runs it: the input's and the weights' casts (and the
// weight gradients' back to float32, one row) are nodes of their own, so a float32 step beside
// it has other nodes and each gets a table of its own. The bf16 logits go to the loss uncast.
TEST_CASE("nnlab explain runs a bf16 step beside a float32 one", "[explain][precision]") {
  const CliResult r = run_cli("explain --model mlp --batch 4 --threads 1 --repeats 1 --device cpu,cpu:precision=bf16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("cpu: its own nodes (not those of cpu:precision=bf16)") != std::string::npos);
  CHECK(r.output.find("cpu:precision=bf16: its own nodes (not those of cpu)") != std::string::npos);
  CHECK(r.output.find("fwd  input       Cast") != std::string::npos);
  CHECK(r.output.find("bwd  weights     Cast          the weights' gradients to float32 (one call)") !=
        std::string::npos);
  CHECK(r.output.find("CrossEntropy  4×10 bf16 → scalar") != std::string::npos);
  CHECK(r.output.find("output") == std::string::npos);
  CHECK(count_of(r.output, "fwd  fc1+relu1   Linear") == 2);
  const CliResult fp32 = run_cli("explain --model mlp --batch 4 --threads 1 --repeats 1");
  REQUIRE(fp32.exit_code == 0);
  CHECK(fp32.output.find("Cast") == std::string::npos);
}

TEST_CASE("the kernel log times each call from its record to the end of its dispatch, nested calls once",
          "[explain][kernel_log]") {
  KernelLogScope log;
  {
    KernelTiming outer(record_kernel("outer", "a"));
    {
      KernelTiming inner(record_kernel("inner", "b"));
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
  {
    KernelTiming later;  // started before the call is known, as CpuBackend::gemm does
    later.attach(record_kernel("later", "c"));
  }
  const std::vector<KernelCall> calls = take_kernel_calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[0].seconds >= 0.002);  // the outer call includes the inner one's time
  CHECK(calls[1].seconds == -1);     // inside a timed call: not counted twice
  CHECK(calls[2].seconds >= 0);
  set_kernel_log_enabled(false);
  {
    KernelTiming off;  // with the log off nothing is recorded
  }
  CHECK(take_kernel_calls().empty());
}

// devices/cuda/launch.h calls record_launch at every launch; these are the calls it would make.
TEST_CASE("the kernel log gives each launch to the innermost open call, or a call of its own",
          "[explain][kernel_log]") {
  KernelLogScope log;
  {
    KernelTiming outer(record_kernel("outer", "a"));
    record_launch("first_kernel", {4, 1, 1}, {256, 1, 1});
    {
      KernelTiming inner(record_kernel("inner", "b"));
      record_launch("inner_kernel", {10, 2, 1}, {32, 32, 1});
    }
    record_launch("after_inner_kernel", {1, 1, 1}, {64, 1, 1});  // the outer call is open again
  }
  record_launch("loose_kernel", {3, 1, 1}, {128, 1, 1});  // no call open
  const std::vector<KernelCall> calls = take_kernel_calls();
  REQUIRE(calls.size() == 3);
  REQUIRE(calls[0].launches.size() == 2);
  CHECK(calls[0].launches[0].kernel == "first_kernel");
  CHECK(calls[0].launches[0].grid.x == 4);
  CHECK(calls[0].launches[0].block.x == 256);
  CHECK(calls[0].launches[1].kernel == "after_inner_kernel");
  REQUIRE(calls[1].launches.size() == 1);
  CHECK(calls[1].launches[0].grid.y == 2);
  CHECK(calls[1].launches[0].block.y == 32);
  CHECK(calls[2].family == "loose_kernel");
  CHECK(calls[2].detail == "(launched outside any recorded call)");
  REQUIRE(calls[2].launches.size() == 1);
  CHECK(calls[2].launches[0].block.x == 128);
}

TEST_CASE("nnlab explain splits a CPU step into kernel time and the time outside the kernels", "[explain]") {
  const CliResult r = run_cli("explain --model mlp --batch 8 --threads 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Three honest answers, chosen by how the two medians compare (they come from different
  // steps, so a loaded or sanitized run may see the kernels take longer than a plain step).
  // Whichever is printed must agree with its own numbers.
  const char* split = "cpu: outside the kernels: a step takes %lf ms, its kernels %lf ms";
  const char* within_noise = "cpu: outside the kernels: nothing measurable: a step takes %lf ms and its kernels %lf ms";
  const char* too_noisy = "cpu: outside the kernels: not measurable here: the kernels took %lf ms in steps timed call by "
                          "call, far more than a plain step (%lf ms)";
  const size_t at = r.output.find("cpu: outside the kernels: ");
  REQUIRE(at != std::string::npos);
  const char* line = r.output.c_str() + at;
  double step = 0, kernels = 0;
  if (std::sscanf(line, split, &step, &kernels) == 2) {
    CHECK(kernels <= step);
  } else if (std::sscanf(line, within_noise, &step, &kernels) == 2) {
    CHECK(kernels > step);
    CHECK(kernels <= 1.2 * step + 0.0005);  // printed to 3 decimals
  } else {
    REQUIRE(std::sscanf(line, too_noisy, &kernels, &step) == 2);
    CHECK(kernels > 1.2 * step - 0.0005);
  }
  CHECK(step > 0);
  CHECK(kernels > 0);
}

TEST_CASE("explain and sweep refuse a model file whose recipe data set has no fixed image size", "[explain][sweep]") {
  const std::string path = (std::filesystem::temp_directory_path() / "nnlab_folder_recipe.json").string();
  std::string text = read_text(std::string(NNLAB_TEST_DIR) + "/../layers/zoo/mlp.json");
  const size_t at = text.find("\"fashion-mnist\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("\"fashion-mnist\"").size(), "\"folder\"");
  std::ofstream(path) << text;
  for (const char* command : {"explain", "sweep"}) {
    const CliResult r = run_cli(std::string(command) + " --model-file " + path);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("its recipe's data set 'folder' has no fixed image size; " + std::string(command) +
                        " needs one") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("nnlab explain names the CPUs' cache-line round trip for a two-thread step, not for one thread",
          "[explain]") {
  const CliResult two = run_cli("explain --model mlp --batch 4 --threads 2");
  REQUIRE(two.exit_code == 0);
  const std::string line = "cpu: between its first two CPUs a cache line's round trip takes ";
  const size_t at = two.output.find(line);
  // Absent only on a machine that lets the process use one CPU, or keeps one busy throughout.
  if (at != std::string::npos) {
    const double ns = std::stod(two.output.substr(at + line.size()));
    CHECK(ns > 1.0);
    CHECK(ns < 1.0e7);
  }
  const CliResult one = run_cli("explain --model mlp --batch 4 --threads 1");
  REQUIRE(one.exit_code == 0);
  CHECK(one.output.find(line) == std::string::npos);
  // One CPU in the affinity mask: no pair to measure, so no line.
  const CliResult pinned = nnlab_test::run_shell("taskset -c 0 " + std::string(NNLAB_CLI_PATH) +
                                                 " explain --model mlp --batch 4 --threads 2");
  REQUIRE(pinned.exit_code == 0);
  CHECK(pinned.output.find(line) == std::string::npos);
}
