// "Break it yourself" (docs/break-it.md): each exercise's failure really happens.
//  1. A missing __syncthreads() (tests/gpu/break_it_kernels.h): ThreadSanitizer reports a data
//     race. Only in the race-check build (scripts/racecheck.sh, build-tsan).
//  2. An index one past the end: AddressSanitizer reports a heap-buffer-overflow, since the
//     simulator's cudaMalloc is ordinary, exactly sized heap memory. Only in the ASan build
//     (scripts/sanitize.sh).
//  3. Swapped transpose flags in the call that hands a GEMM to the ladder's kernels: the op
//     table's comparison of CUDA against the CPU reports a mismatch. Every build with a device.
// The broken kernels of 1 and 2 run in a child process (this executable again, a hidden test
// case), since the sanitizer stops the process it reports in; the child's output must hold the
// report. Each case first runs the correct kernel here and checks its result.
#include "gpu/gpu_support.h"

#include <cstdlib>
#include <filesystem>

#include "op_cases.h"

#ifdef NNLAB_CUDA_SIMULATOR
#include "cli_support.h"
#include "devices/cuda/sim/sim_launch.h"
#include "gpu/break_it_kernels.h"

#if defined(__SANITIZE_THREAD__)
#define NNLAB_TEST_TSAN 1
#elif defined(__SANITIZE_ADDRESS__)
#define NNLAB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NNLAB_TEST_TSAN 1
#elif __has_feature(address_sanitizer)
#define NNLAB_TEST_ASAN 1
#endif
#endif
#endif

using namespace nnlab;
using namespace nnlab::gputest;

#ifdef NNLAB_CUDA_SIMULATOR
namespace {

using break_it::Variant;

// Device copies of host floats, freed at the end of the scope; cudaMalloc'd at the exact size.
struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& host) : n(host.size()) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p); }
  std::vector<float> read() const {
    std::vector<float> host(n);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
  size_t n;
  float* p = nullptr;
};

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// Exercise 1: two blocks of reverse_in_block_kernel; y as the kernel writes it.
template <Variant kVariant>
std::vector<float> reverse_blocks() {
  DeviceFloats x(iota_floats(2 * break_it::kReverseBlock)), y(std::vector<float>(x.n, 0.0f));
  sim::launch_kernel("reverse_in_block_kernel", break_it::reverse_in_block_kernel<kVariant>, dim3(2),
                     dim3(break_it::kReverseBlock), nullptr, static_cast<const float*>(x.p), y.p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return y.read();
}

// Exercise 2: twice_kernel over 1000 elements in blocks of 256 (24 threads past the end).
constexpr int kTwiceN = 1000, kTwiceBlock = 256;
template <Variant kVariant>
std::vector<float> twice() {
  DeviceFloats x(iota_floats(kTwiceN)), y(std::vector<float>(kTwiceN, 0.0f));
  sim::launch_kernel("twice_kernel", break_it::twice_kernel<kVariant>, dim3((kTwiceN + kTwiceBlock - 1) / kTwiceBlock),
                     dim3(kTwiceBlock), nullptr, static_cast<const float*>(x.p), y.p, kTwiceN);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return y.read();
}

#if defined(NNLAB_TEST_TSAN) || defined(NNLAB_TEST_ASAN)
// Runs the hidden case `tag` of this executable in a child and checks that the sanitizer
// stopped it with `report` (written on stderr) in `kernel`.
void require_sanitizer_report(const std::string& tag, const std::string& report, const std::string& kernel) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const nnlab_test::CliResult child = nnlab_test::run_shell("NNLAB_BREAK_IT_CHILD=1 '" + self + "' '" + tag + "'");
  INFO(child.output);
  CHECK(child.exit_code != 0);
  CHECK_THAT(child.output, Catch::Contains(report) && Catch::Contains(kernel));
}
#endif

// Whether the parent case started this child. Hidden cases are not enough: a test spec of
// exclusions only (scripts/racecheck.sh's "~[explain]~[training]~[cli]") selects them too, and
// a broken kernel must not stop a whole sanitizer run.
bool started_by_parent() {
  if (std::getenv("NNLAB_BREAK_IT_CHILD")) return true;
  WARN("run by the break-it cases in a child process (NNLAB_BREAK_IT_CHILD=1); nothing to do here");
  return false;
}

}  // namespace

// The children: each launches the broken kernel, which the sanitizer stops. Hidden ([.]) and
// guarded, so only the cases below run them, by name.
TEST_CASE("gpu: break it: reverse_in_block_kernel without its barrier", "[.break_it_race]") {
  if (started_by_parent()) reverse_blocks<Variant::broken>();
}
TEST_CASE("gpu: break it: twice_kernel with its guard one past the end", "[.break_it_overflow]") {
  if (started_by_parent()) twice<Variant::broken>();
}

TEST_CASE("gpu: break it: without its __syncthreads() a kernel races and ThreadSanitizer says so",
          "[gpu][break_it][simulator]") {
  const std::vector<float> y = reverse_blocks<Variant::correct>();
  for (int i = 0; i < 2 * break_it::kReverseBlock; ++i) {
    const int block = i / break_it::kReverseBlock, t = i % break_it::kReverseBlock;
    REQUIRE(y[size_t(i)] == static_cast<float>(block * break_it::kReverseBlock + break_it::kReverseBlock - 1 - t));
  }
#ifdef NNLAB_TEST_TSAN
  require_sanitizer_report("[break_it_race]", "WARNING: ThreadSanitizer: data race", "reverse_in_block_kernel");
#else
  WARN("not a ThreadSanitizer build: the race itself is checked by scripts/racecheck.sh (build-tsan)");
#endif
}

TEST_CASE("gpu: break it: an index one past the end of cudaMalloc'd memory and AddressSanitizer says so",
          "[gpu][break_it][simulator]") {
  const std::vector<float> y = twice<Variant::correct>();
  for (int i = 0; i < kTwiceN; ++i) REQUIRE(y[size_t(i)] == 2.0f * static_cast<float>(i));
#ifdef NNLAB_TEST_ASAN
  require_sanitizer_report("[break_it_overflow]", "ERROR: AddressSanitizer: heap-buffer-overflow", "twice_kernel");
#else
  WARN("not an AddressSanitizer build: the overflow itself is checked by scripts/sanitize.sh (build-asan)");
#endif
}
#endif

// Exercise 3. CudaBackend::gemm (devices/cuda/gemm_cuda.cu) hands a product to the GEMM
// ladder's kernels as gemm_ladder(ctx, rung, trans_a, trans_b, ...); the exercise swaps the two
// flags. The Linear layer's forward y = x · wᵀ is gemm(false, true, n, out, in): swapped, the
// kernel reads x as if stored transposed and w as not, the same buffers, so nothing fails but
// the numbers. Here the product is called with the flags the edited line would pass, on the
// naive rung, and measured as the op table measures a CUDA result against its CPU twin
// (worst_excess under the linear case's parity tolerance, as require_allclose does).
TEST_CASE("gpu: break it: swapped transpose flags in a GEMM fail the op table's parity check", "[gpu][break_it]") {
  const nnlab_test::OpCase* lin = nullptr;
  for (const nnlab_test::OpCase& c : nnlab_test::op_cases())
    if (c.name == "linear with bias") lin = &c;
  REQUIRE(lin);
  const std::vector<Tensor> in = nnlab_test::draw_inputs(*lin, next_seed(), DType::Float32);
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const int64_t n = x.dim(0), out = w.dim(0), k = x.dim(1);
  Tensor y = Tensor::empty({n, out});
  cpu().gemm(false, true, n, out, k, 1.0, x, w, 0.0, y);  // the CPU twin: the reference

  GemmImplScope rung(GemmImpl::Naive);
  const Tensor gx = on_gpu(x), gw = on_gpu(w);
  Tensor as_built = Tensor::empty({n, out}, DType::Float32, Device::cuda(0));
  gpu().gemm(false, true, n, out, k, 1.0, gx, gw, 0.0, as_built);
  Tensor swapped = Tensor::empty({n, out}, DType::Float32, Device::cuda(0));
  gpu().gemm(true, false, n, out, k, 1.0, gx, gw, 0.0, swapped);

  const auto excess = [&](const Tensor& got) {
    return nnlab_test::worst_excess(got.to_vector<double>(), y.to_vector<double>(), lin->parity.rtol,
                                    lin->parity.atol)
        .worst;
  };
  CHECK(excess(as_built) <= 1.0);
  CHECK(excess(swapped) > 1.0);
}
