// Every case of the op table (tests/op_cases.h) on CUDA: forward and gradients (through
// autograd's backward) against the CPU's, in float32, on fresh random inputs, within the
// case's parity tolerance; dropout's mask bit for bit. The cases that run a GEMM again on
// each of nnlab's own GEMM kernels (--gemm-impl naive|tiled|registers).
#include "gpu/gpu_support.h"
#include "op_cases.h"

using namespace nnlab;
using namespace nnlab::gputest;
using nnlab_test::OpCase;
using nnlab_test::op_cases;

namespace {
// 1 where an element is zero (dropped), else 0.
Tensor zero_pattern(const Tensor& t) {
  std::vector<int32_t> zeros;
  for (float v : t.to_vector<float>()) zeros.push_back(v == 0.0f ? 1 : 0);
  return Tensor::from_vector(zeros, {static_cast<int64_t>(zeros.size())});
}

// One case: its forward and every input's gradient on CUDA against the CPU's.
void check_on_gpu(const OpCase& c) {
  const std::vector<Tensor> inputs = nnlab_test::draw_inputs(c, next_seed(), DType::Float32);
  const std::vector<Tensor> on_cpu = nnlab_test::leaves_as(c, inputs, DType::Float32);
  std::vector<Tensor> on_cuda;
  for (size_t i = 0; i < inputs.size(); ++i) {
    on_cuda.push_back(on_gpu(inputs[i]));
    if (c.inputs[i].grad) on_cuda.back().set_requires_grad(true);
  }
  const Tensor y = c.run(on_cpu), gy = c.run(on_cuda);
  REQUIRE(gy.device() == Device::cuda(0));
  REQUIRE(gy.shape() == y.shape());
  require_allclose(gy, y, c.parity.rtol, c.parity.atol, c.name + " forward");
  if (c.mask_parity) require_equal<int32_t>(zero_pattern(gy), zero_pattern(y), c.name + " mask");

  const Tensor dy = fresh_tensor(y.shape());
  y.backward(dy);
  gy.backward(on_gpu(dy));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!c.inputs[i].grad) continue;
    REQUIRE(on_cuda[i].grad().defined());
    require_allclose(on_cuda[i].grad(), on_cpu[i].grad(), c.parity.rtol, c.parity.atol,
                     c.name + " input " + std::to_string(i) + " gradient");
  }
}

}  // namespace

TEST_CASE("gpu: every op of the op table matches the CPU forward and backward", "[gpu][op_table]") {
  for (const OpCase& c : op_cases()) {
    DYNAMIC_SECTION(c.name) { check_on_gpu(c); }
  }
}

// matmul, linear and its ReLU epilogue once more on each of nnlab's own GEMM kernels: every
// product of their forward and backward (NN, NT, TN) runs on the rung, the CPU twin stays
// the reference.
TEST_CASE("gpu: the op table's GEMM ops on every --gemm-impl rung", "[gpu][op_table][gemm]") {
  const GemmImpl rung = GENERATE(GemmImpl::Naive, GemmImpl::Tiled, GemmImpl::Registers);
  GemmImplScope scope(rung);
  int checked = 0;
  for (const OpCase& c : op_cases()) {
    if (!c.gemm) continue;
    ++checked;
    DYNAMIC_SECTION(c.name << " on " << gemm_impl_name(rung)) { check_on_gpu(c); }
  }
  CHECK(checked == 5);  // matmul, linear with and without bias, each with and without the ReLU
}
