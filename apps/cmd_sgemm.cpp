// nnlab sgemm: a device's sgemm rate, and on CUDA the GEMM ladder's rungs side by side.
//
//   nnlab sgemm --device cpu --size 1024            one line: the practical peak (bench.py reads it)
//   nnlab sgemm --device cuda --gemm-impl all --zoo  a table: GFLOP/s of each rung on 1024³ and on
//                                                    the three products of every Linear layer in
//                                                    the zoo, each rung's share of cuBLAS beside it
// The table times Backend::gemm itself on buffers made once, waiting for the device after
// every call, so a rate is the kernel's (and its launch's), nothing else.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "apps/commands.h"
#include "apps/train_config.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/random.h"
#include "devices/backend.h"
#include "devices/gemm_impl.h"
#include "devices/host_cpu.h"
#include "devices/kernel_log.h"
#include "devices/registry.h"
#include "layers/zoo.h"

namespace nnlab {

namespace {

using Clock = std::chrono::steady_clock;

// The original measurement: matmul of two size² matrices, 12 runs, the first two untimed.
int one_rate(int64_t size, Device device) {
  NoGradGuard no_grad;
  Tensor a = Tensor::empty({size, size}), b = Tensor::empty({size, size});
  uniform_fill(a, -1, 1, RandomStream{1, RandomPurpose::Init, 0});
  uniform_fill(b, -1, 1, RandomStream{1, RandomPurpose::Init, 1});
  a = a.to(device);
  b = b.to(device);
  const double flop = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  std::vector<double> rates;
  for (int rep = 0; rep < 12; ++rep) {
    const auto t0 = Clock::now();
    Tensor c = matmul(a, b);
    sum(c.rows(0, 1)).item();  // reading a value back waits for the device to finish
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep >= 2) rates.push_back(flop / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  const bool bf16 = device.is_cpu() ? host_cpu::bf16_products() : cuda_options().math == CudaMath::Bf16;
  const bool tf32 = device.is_cuda() && cuda_options().math == CudaMath::Tf32;
  std::printf("sgemm %lld³ on %s%s, %d threads: median %.1f GFLOP/s, best %.1f GFLOP/s\n", static_cast<long long>(size),
              device.str().c_str(), bf16 ? " (bf16 inputs)" : tf32 ? " (tf32)" : "", host_cpu::threads(),
              rates[rates.size() / 2], rates.back());
  return 0;
}

// One row of the table: C(m×n) = op(A)(m×k) · op(B)(k×n), and where it comes from.
struct Product {
  std::string what;  // "1024³", "mlp fc1.weight forward"
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// A Linear layer (out, in) at batch b runs three products (Backend::linear_forward and
// linear_backward): y = x·wᵀ (NT b×out×in), dx = dz·w (NN b×in×out), dw = dzᵀ·x (TN out×in×b).
// Every model of the zoo at its recipe's batch; a product already listed is not repeated. (A
// first layer's dx is listed too, though training skips it: its input needs no gradient.)
std::vector<Product> zoo_products() {
  std::vector<Product> out;
  std::set<std::tuple<bool, bool, int64_t, int64_t, int64_t>> seen;
  for (const ModelFile& m : model_zoo()) {
    InputSpec input;
    if (!fixed_input(m.recipe.data, input)) continue;
    const int64_t batch = m.recipe.batch;
    for (const auto& [name, t] : build_model(m, input)->named_parameters()) {
      if (t.ndim() != 2) continue;  // a Linear weight (out, in); convolutions' are 4-d
      const int64_t o = t.dim(0), i = t.dim(1);
      const std::string layer = m.name + " " + name.substr(0, name.rfind('.'));
      for (const Product& p : {Product{layer + " forward", false, true, batch, o, i},
                               Product{layer + " dx", false, false, batch, i, o},
                               Product{layer + " dw", true, false, o, i, batch}})
        if (seen.insert({p.trans_a, p.trans_b, p.m, p.n, p.k}).second) out.push_back(p);
    }
  }
  return out;
}

// The median rate of `runs` timed calls of one rung, after `warm` untimed ones.
double rate_of(Backend& be, const Product& p, const Tensor& a, const Tensor& b, Tensor& c, int warm, int runs) {
  std::vector<double> rates;
  for (int rep = 0; rep < warm + runs; ++rep) {
    const auto t0 = Clock::now();
    be.gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0, a, b, 0.0, c);
    be.synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep >= warm) rates.push_back(2.0 * double(p.m) * double(p.n) * double(p.k) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

std::vector<GemmImpl> parse_rungs(const std::string& list, Device device) {
  std::vector<GemmImpl> rungs;
  if (list == "all") {
    rungs = {GemmImpl::Cublas, GemmImpl::Naive, GemmImpl::Tiled, GemmImpl::Registers};
  } else {
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) rungs.push_back(parse_gemm_impl(item));
  }
  NNLAB_CHECK(!rungs.empty(),
              "--gemm-impl: no GEMM named; give cublas, naive, tiled, registers (comma-separated) or all");
  for (GemmImpl r : rungs) check_gemm_impl(r, device);
  return rungs;
}

// The ladder's table. On the simulator each rung's threads run as fibers on the CPU, so the
// runs are fewer there and the times are a CPU's, marked as such.
int ladder_rates(int64_t size, Device device, const std::vector<GemmImpl>& rungs, bool zoo) {
  const bool simulated = device.is_cuda() && cuda_simulated();
  const int warm = simulated ? 1 : 3, runs = simulated ? 3 : 10;
  std::vector<Product> products = {{std::to_string(size) + "³", false, false, size, size, size}};
  if (zoo)
    for (const Product& p : zoo_products()) products.push_back(p);
  std::printf("sgemm on %s: GFLOP/s, the median of %d runs after %d untimed%s; (%%) is the share of cublas\n",
              device_label(device).c_str(), runs, warm,
              simulated ? " (simulated: CPU fibers, no GPU's speed)" : "");
  std::printf("%-32s %-4s %-16s", "product", "op", "m×n×k");
  for (GemmImpl r : rungs) std::printf(" %16s", device.is_cuda() ? gemm_impl_name(r) : "cpu");
  std::printf("\n");
  NoGradGuard no_grad;
  Backend& be = backend_for(device);
  const GemmImpl before = gemm_impl();
  for (const Product& p : products) {
    Tensor a = Tensor::empty(p.trans_a ? Shape{p.k, p.m} : Shape{p.m, p.k});
    Tensor b = Tensor::empty(p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n});
    uniform_fill(a, -1, 1, RandomStream{1, RandomPurpose::Init, 0});
    uniform_fill(b, -1, 1, RandomStream{1, RandomPurpose::Init, 1});
    a = a.to(device);
    b = b.to(device);
    Tensor c = Tensor::zeros({p.m, p.n}, DType::Float32, device);
    std::vector<double> rates;
    for (GemmImpl r : rungs) {
      set_gemm_impl(r);
      rates.push_back(rate_of(be, p, a, b, c, warm, runs));
    }
    const std::string op = std::string(p.trans_a ? "T" : "N") + (p.trans_b ? "T" : "N");
    std::printf("%-32s %-4s %-16s", p.what.c_str(), op.c_str(), dims_text({p.m, p.n, p.k}).c_str());
    const auto cublas = std::find(rungs.begin(), rungs.end(), GemmImpl::Cublas);
    for (size_t i = 0; i < rungs.size(); ++i) {
      char cell[64];
      if (cublas != rungs.end() && rungs[i] != GemmImpl::Cublas)
        std::snprintf(cell, sizeof cell, "%.1f (%.0f%%)", rates[i], 100.0 * rates[i] / rates[cublas - rungs.begin()]);
      else
        std::snprintf(cell, sizeof cell, "%.1f", rates[i]);
      std::printf(" %16s", cell);
    }
    std::printf("\n");
  }
  set_gemm_impl(before);
  return 0;
}

}  // namespace

void register_sgemm_command(CLI::App& app) {
  struct Options {
    int64_t size = 1024;
    int threads = 0;
    std::string device = "cpu", gemm = "cublas", math = "fp32";
    bool zoo = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("sgemm", "Measure the sgemm rate of a device (the practical peak), or on CUDA "
                                              "each GEMM kernel of the ladder (--gemm-impl all --zoo)");
  sub->add_option("--size", o->size, "m = n = k (with a ladder on the simulator, 128 unless given)")
      ->capture_default_str();
  sub->add_option("--threads", o->threads, "CPU threads (default: all cores)");
  sub->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  sub->add_option("--gemm-impl", o->gemm,
                  "CUDA: the GEMM(s) to time, comma-separated: cublas, naive, tiled, registers, or all; more than "
                  "cublas (or --zoo) prints a table of GFLOP/s")
      ->capture_default_str();
  sub->add_flag("--zoo", o->zoo, "Also time the three products of every Linear layer in the zoo at its recipe's batch");
  sub->add_option("--math", o->math, "fp32, tf32 (CUDA) or bf16 (CUDA, or a CPU with AVX-512 BF16): the products' "
                                     "math mode, as train's --math")
      ->capture_default_str();
  add_command(sub, [sub, o] {
    NNLAB_CHECK(o->size > 0 && o->size <= 16384, "--size must lie in 1..16384, got ", o->size);
    host_cpu::set_threads(o->threads);
    const Device device = resolve_device(o->device, nullptr);
    const CudaMath math = parse_cuda_math(o->math, "--math");
    NNLAB_CHECK(math != CudaMath::Tf32 || device.is_cuda(),
                "--math tf32 is a format of NVIDIA's tensor cores; on the CPU use fp32 (the default) or bf16");
    if (device.is_cpu()) host_cpu::set_bf16_products(math == CudaMath::Bf16);  // throws where the CPU cannot
    if (device.is_cuda()) set_cuda_options({math, cuda_options().deterministic});
    const std::vector<GemmImpl> rungs = parse_rungs(o->gemm, device);
    if (rungs == std::vector<GemmImpl>{GemmImpl::Cublas} && !o->zoo) return one_rate(o->size, device);
    const bool simulated = device.is_cuda() && cuda_simulated();
    return ladder_rates(simulated && sub->count("--size") == 0 ? 128 : o->size, device, rungs, o->zoo);
  });
}

}  // namespace nnlab
