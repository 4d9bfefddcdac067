// The two builds of nnlab's own CPU kernels (devices/cpu/cpu_isa.h): the AVX2 kernels, which
// any x86-64-v3 CPU runs, against the AVX-512 ones on the zoo's shapes, for every dispatched
// family (small_gemm, pooling, the direct and Winograd convolutions, each direction), within
// the float32 tolerance of test_small_gemm.cpp; and the choice itself (set_cpu_isa, the
// dispatch, NNLAB_CPU_ISA at the command line).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "cli_support.h"
#include "core/random.h"
#include "devices/cpu/conv2d_direct.h"
#include "devices/cpu/conv2d_winograd.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/pool2d.h"
#include "devices/cpu/small_gemm.h"
#include "devices/registry.h"

using namespace nnlab;

namespace {

// Catch2 2.13 has no SKIP: on a CPU without AVX-512 there is nothing to compare.
bool can_compare() {
  if (cpu_supports(CpuIsa::avx512)) return true;
  WARN("this CPU (or build) has no AVX-512 kernels: the AVX2 kernels are checked by the op tests alone");
  return false;
}

Tensor random(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape));
  uniform_fill(t, -1, 1, RandomStream{seed, RandomPurpose::Init, 0});
  return t;
}

Tensor absolute(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = std::fabs(t.data<float>()[i]);
  return out;
}

// |a − b| ≤ eps · (4 + magnitude), magnitude = Σ |terms| of each output (the same kernel on
// the inputs' absolute values): eps = 1e-6 is test_small_gemm.cpp's float32 tolerance for
// sums of products.
void check_close(const Tensor& a, const Tensor& b, const Tensor& magnitude, double eps = 1e-6) {
  REQUIRE(a.numel() == b.numel());
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double diff = std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]);
    const double bound = eps * (4.0 + magnitude.data<float>()[i]);
    worst = std::max(worst, diff / bound);
    bad += diff > bound;
  }
  INFO("largest difference / tolerance: " << worst);
  CHECK(bad == 0);
}

// Makes `isa` the chosen set for the scope of the object.
struct UseIsa {
  CpuIsa saved = cpu_isa();
  explicit UseIsa(CpuIsa isa) { set_cpu_isa(isa); }
  ~UseIsa() { set_cpu_isa(saved); }
};

Conv2dGeometry conv(int64_t n, int64_t c, int64_t k, int64_t r, int64_t hw, int64_t pad) {
  const int64_t out = hw + 2 * pad - r + 1;
  return {n, c, hw, hw, k, r, r, 1, 1, pad, pad, out, out};
}

// One convolution family (direct or winograd) in all three directions, AVX2 against AVX-512.
template <typename Forward2, typename Forward512, typename Data2, typename Data512, typename Filter2,
          typename Filter512>
void compare_conv(const Conv2dGeometry& g, Forward2 fwd2, Forward512 fwd512, Data2 data2, Data512 data512,
                  Filter2 filter2, Filter512 filter512, double eps = 1e-6) {
  const Tensor x = random({g.n, g.c, g.h, g.w}, 1), w = random({g.k, g.c, g.r, g.s}, 2), b = random({g.k}, 3);
  const Tensor dy = random({g.n, g.k, g.p, g.q}, 4);
  const Tensor ax = absolute(x), aw = absolute(w), ab = absolute(b), ady = absolute(dy);
  auto y = [&] { return Tensor::empty({g.n, g.k, g.p, g.q}); };
  auto dx = [&] { return Tensor::empty({g.n, g.c, g.h, g.w}); };
  auto dw = [&] { return Tensor::empty({g.k, g.c, g.r, g.s}); };
  Tensor y2 = y(), y512 = y(), ym = y(), dx2 = dx(), dx512 = dx(), dxm = dx(), dw2 = dw(), dw512 = dw(), dwm = dw();
  fwd2(g, x, w, &b, y2, false);
  fwd512(g, x, w, &b, y512, false);
  fwd2(g, ax, aw, &ab, ym, false);
  {
    INFO("forward");
    check_close(y2, y512, ym, eps);
  }
  data2(g, dy, w, dx2);
  data512(g, dy, w, dx512);
  data2(g, ady, aw, dxm);
  {
    INFO("backward data");
    check_close(dx2, dx512, dxm, eps);
  }
  // The bias gradient the filter gradient takes along: the same sums in the same order on both
  // instruction sets (bias_lanes.h), so the same bits.
  Tensor db2 = Tensor::empty({g.k}), db512 = Tensor::empty({g.k}), dbm = Tensor::empty({g.k});
  filter2(g, dy, x, dw2, &db2);
  filter512(g, dy, x, dw512, &db512);
  filter2(g, ady, ax, dwm, &dbm);
  {
    INFO("backward filter");
    check_close(dw2, dw512, dwm, eps);
    CHECK(db2.to_vector<float>() == db512.to_vector<float>());
  }
}

}  // namespace

TEST_CASE("AVX2 and AVX-512 small_gemm agree on the Winograd shapes", "[cpu_isa][gemm]") {
  if (!can_compare()) return;
  for (int64_t m : {1, 8, 9, 32, 64})
    for (int64_t n : {7, 16, 49, 100})
      for (int64_t k : {1, 9, 32, 64}) {
        INFO("m " << m << " n " << n << " k " << k);
        const Tensor a = random({m, k}, 5), b = random({k, n}, 6), c0 = random({m, n}, 7);
        Tensor c2 = c0.clone(), c512 = c0.clone(), cm = absolute(c0);
        cpu::avx2::small_gemm_nn(m, n, k, a.data<float>(), b.data<float>(), c2.data<float>(), true);
        cpu::avx512::small_gemm_nn(m, n, k, a.data<float>(), b.data<float>(), c512.data<float>(), true);
        cpu::avx2::small_gemm_nn(m, n, k, absolute(a).data<float>(), absolute(b).data<float>(), cm.data<float>(), true);
        check_close(c2, c512, cm);
        // nt: C (m × k) += A (m × n) · B (k × n)ᵀ, n the long Winograd tile dimension
        const Tensor bt = random({k, n}, 8), at = random({m, n}, 9);
        Tensor s2 = Tensor::zeros({m, k}), s512 = Tensor::zeros({m, k}), sm = Tensor::zeros({m, k});
        cpu::avx2::small_gemm_nt(m, k, n, at.data<float>(), bt.data<float>(), s2.data<float>(), k, true, nullptr, false);
        cpu::avx512::small_gemm_nt(m, k, n, at.data<float>(), bt.data<float>(), s512.data<float>(), k, true, nullptr, false);
        cpu::avx2::small_gemm_nt(m, k, n, absolute(at).data<float>(), absolute(bt).data<float>(), sm.data<float>(), k,
                                 true, nullptr, false);
        check_close(s2, s512, sm);
      }
}

TEST_CASE("AVX2 and AVX-512 Winograd convolutions agree in every direction", "[cpu_isa][conv2d]") {
  if (!can_compare()) return;
  // the cnn's c2 (32→64 on 14×14, pad 1) at a small batch, and an odd 9×9 plane with pad 0,
  // in both algorithms
  for (const cpu::WinogradTile tile : {cpu::WinogradTile::F2x2, cpu::WinogradTile::F4x4})
    for (const Conv2dGeometry& g : {conv(3, 32, 64, 3, 14, 1), conv(2, 8, 12, 3, 9, 0)}) {
      INFO(cpu::winograd_tile_name(tile) << " c " << g.c << " k " << g.k << " " << g.h << "×" << g.w << " pad "
                                         << g.pad_h);
      const auto with_tile = [tile](auto kernel) {
        return [tile, kernel](const Conv2dGeometry& g, auto&&... args) { kernel(g, tile, args...); };
      };
      // The magnitude (the kernel on absolute values) does not see the cancellations inside
      // the transforms, which F(4×4)'s constants (4, 5, 8) make larger: its rounding measured
      // about 20× F(2×2)'s against exact sums (test_conv_winograd.cpp), hence 1e-5.
      compare_conv(g, with_tile(cpu::avx2::winograd_forward), with_tile(cpu::avx512::winograd_forward),
                   with_tile(cpu::avx2::winograd_backward_data), with_tile(cpu::avx512::winograd_backward_data),
                   with_tile(cpu::avx2::winograd_backward_filter), with_tile(cpu::avx512::winograd_backward_filter),
                   tile == cpu::WinogradTile::F4x4 ? 1e-5 : 1e-6);
    }
}

TEST_CASE("AVX2 and AVX-512 direct convolutions agree in every direction", "[cpu_isa][conv2d]") {
  if (!can_compare()) return;
  // lenet5's c1 (1→6 5×5 pad 2 on 28×28) and c2 (6→16 5×5 on 14×14: the channel layout of
  // the forward and the filter gradient), cifar-cnn's first layer (3→32 3×3 pad 1) on a small
  // plane, a channel layout over 20 columns (forward tiles of 10 in AVX-512, 5 in AVX2), and
  // lenet5's c2 on 20 images, whose input gradient puts 16 or 8 images in the lanes
  for (const Conv2dGeometry& g : {conv(3, 1, 6, 5, 28, 2), conv(3, 6, 16, 5, 14, 0), conv(2, 3, 32, 3, 12, 1),
                                  conv(2, 2, 16, 5, 20, 2), conv(20, 6, 16, 5, 14, 0)}) {
    INFO("c " << g.c << " k " << g.k << " " << g.r << "×" << g.s << " on " << g.h << "×" << g.w);
    // each direction in the layout its plan gives it
    const auto in_planned_layout = [](cpu::ConvDirection direction, auto kernel) {
      return [direction, kernel](const Conv2dGeometry& g, auto&&... args) {
        kernel(g, cpu::plan_conv(g, direction, DType::Float32, ConvImpl::Auto).layout, args...);
      };
    };
    using cpu::ConvDirection;
    compare_conv(g, in_planned_layout(ConvDirection::Forward, cpu::avx2::direct_forward),
                 in_planned_layout(ConvDirection::Forward, cpu::avx512::direct_forward),
                 in_planned_layout(ConvDirection::BackwardData, cpu::avx2::direct_backward_data),
                 in_planned_layout(ConvDirection::BackwardData, cpu::avx512::direct_backward_data),
                 in_planned_layout(ConvDirection::BackwardFilter, cpu::avx2::direct_backward_filter),
                 in_planned_layout(ConvDirection::BackwardFilter, cpu::avx512::direct_backward_filter));
  }
}

TEST_CASE("AVX2 and AVX-512 pooling agree exactly", "[cpu_isa][pool2d]") {
  if (!can_compare()) return;
  // 2×2 max-pool (the AVX-512 loops) on even and odd planes, wider than one vector, and even
  // planes of rows short enough (q ≤ 8) to be pooled several rows to a vector, groups running
  // into the next plane (14, 10, 4, 2); a 3×3 average. Max-pooling selects, so both must agree
  // bit for bit, winners included.
  for (int64_t hw : {28, 14, 7, 37, 10, 4, 2}) {
    for (bool relu : {false, true}) {  // with the fused ReLU too (Pool2dGeometry::relu)
      INFO("plane " << hw << "×" << hw << (relu ? ", fused ReLU" : ""));
      const int64_t n = 2, c = 3, out = hw / 2;
      Pool2dGeometry g{n, c, hw, hw, 2, 2, 2, 2, 0, 0, out, out};
      g.relu = relu;
      const Tensor x = random({n, c, hw, hw}, 10), dy = random({n, c, out, out}, 11);
      Tensor y2 = Tensor::empty({n, c, out, out}), y512 = Tensor::empty({n, c, out, out});
      Tensor a2 = Tensor::empty({n, c, out, out}, DType::Int32), a512 = Tensor::empty({n, c, out, out}, DType::Int32);
      cpu::avx2::maxpool2d_forward(g, x, y2, a2);
      cpu::avx512::maxpool2d_forward(g, x, y512, a512);
      CHECK(y2.to_vector<float>() == y512.to_vector<float>());
      CHECK(a2.to_vector<int32_t>() == a512.to_vector<int32_t>());
      Tensor dx2 = Tensor::empty({n, c, hw, hw}), dx512 = Tensor::empty({n, c, hw, hw});
      cpu::avx2::maxpool2d_backward(g, dy, a2, dx2);
      cpu::avx512::maxpool2d_backward(g, dy, a512, dx512);
      CHECK(dx2.to_vector<float>() == dx512.to_vector<float>());
    }
  }
  const Pool2dGeometry g{2, 3, 9, 9, 3, 3, 2, 2, 1, 1, 5, 5};
  const Tensor x = random({2, 3, 9, 9}, 12);
  Tensor y2 = Tensor::empty({2, 3, 5, 5}), y512 = Tensor::empty({2, 3, 5, 5});
  cpu::avx2::avgpool2d_forward(g, x, y2);
  cpu::avx512::avgpool2d_forward(g, x, y512);
  CHECK(y2.to_vector<float>() == y512.to_vector<float>());
}

TEST_CASE("the backend runs the kernels of the chosen instruction set", "[cpu_isa]") {
  // lenet5's c2 forward through the kernel table, against each set's own kernel, bit for bit
  const Conv2dGeometry g = conv(2, 6, 16, 5, 14, 0);
  const Tensor x = random({g.n, g.c, g.h, g.w}, 13), w = random({g.k, g.c, g.r, g.s}, 14), b = random({g.k}, 15);
  Backend& cpu_backend = backend_for(Device::cpu());
  for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512}) {
    if (!cpu_supports(isa)) continue;
    INFO(cpu_isa_name(isa));
    const UseIsa use(isa);
    CHECK(cpu_isa() == isa);
    CHECK(cpu_isa_report() == std::string(cpu_isa_name(isa)) + " (set by the program)");
    Tensor through_table = Tensor::empty({g.n, g.k, g.p, g.q}), own = Tensor::empty({g.n, g.k, g.p, g.q});
    cpu_backend.conv2d_forward(g, ConvEpilogue{}, x, w, &b, through_table, nullptr);
    const cpu::DirectLayout layout = cpu::plan_conv(g, cpu::ConvDirection::Forward, DType::Float32, ConvImpl::Auto).layout;
    (isa == CpuIsa::avx512 ? cpu::avx512::direct_forward : cpu::avx2::direct_forward)(g, layout, x, w, &b, own, false);
    CHECK(through_table.to_vector<float>() == own.to_vector<float>());
  }
  if (!cpu_supports(CpuIsa::avx512)) CHECK_THROWS_WITH(set_cpu_isa(CpuIsa::avx512), Catch::Contains("avx512"));
}

TEST_CASE("NNLAB_CPU_ISA forces the kernels, and a bad value is refused", "[cpu_isa][cli]") {
  using nnlab_test::run_shell;
  const std::string cli = NNLAB_CLI_PATH;
  const auto forced = run_shell("NNLAB_CPU_ISA=avx2 " + cli + " devices");
  REQUIRE(forced.exit_code == 0);
  CHECK(forced.output.find("cpu kernels: avx2 (forced by NNLAB_CPU_ISA)") != std::string::npos);
  const auto chosen = run_shell("env -u NNLAB_CPU_ISA " + cli + " devices");
  REQUIRE(chosen.exit_code == 0);
  CHECK(chosen.output.find(cpu_supports(CpuIsa::avx512) ? "cpu kernels: avx512 (auto)" : "cpu kernels: avx2 (auto)") !=
        std::string::npos);
  const auto bad = run_shell("NNLAB_CPU_ISA=sse2 " + cli + " devices");
  CHECK(bad.exit_code == 1);
  CHECK(bad.output == "nnlab: error: NNLAB_CPU_ISA='sse2' is not an instruction set nnlab has kernels for: use avx2, "
                      "avx512 or auto\n");
  if (!cpu_supports(CpuIsa::avx512)) {
    const auto missing = run_shell("NNLAB_CPU_ISA=avx512 " + cli + " devices");
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("asks for the avx512 kernels") != std::string::npos);
  }
}

TEST_CASE("a short training on the forced AVX2 kernels runs and says so", "[cpu_isa][cli]") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const nnlab_test::TempDir dir("nnlab_isa");
  const std::string metrics = dir / "m.jsonl";
  // lenet5 runs two dispatched families: its direct convolutions and max-pools
  const auto r = nnlab_test::run_shell("NNLAB_CPU_ISA=avx2 " + std::string(NNLAB_CLI_PATH) +
                                       " train --model lenet5 --max-steps 3 --threads 1 --seed 1 --metrics-every 1"
                                       " --metrics " + metrics);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("cpu kernels: avx2 (forced by NNLAB_CPU_ISA)") != std::string::npos);
  CHECK(nnlab_test::read_text(metrics).find(R"("kernels":"avx2","kernels_chosen":"forced by NNLAB_CPU_ISA")") !=
        std::string::npos);
  CHECK(nnlab_test::step_losses(metrics).size() == 3);
}
