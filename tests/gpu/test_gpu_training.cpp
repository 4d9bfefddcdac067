// Whole-device behaviour: the probe and the device report, the caching allocator (no
// cudaMalloc once training reaches its steady state; a clear out-of-memory message), and an
// identical strict-float32 training run of the `cnn` model on the CPU and on CUDA.
#include "gpu/gpu_support.h"

#include <cmath>
#include <memory>

#include "autograd/ops.h"
#include "devices/cuda/cuda_backend.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/zoo.h"
#include "optim/optimizer.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

// The zoo's cnn (torch_bench.py CNN: conv32-conv64-fc128 with two 2×2 max pools) or, while
// the zoo lacks it, the same layers under the same names built here.
std::shared_ptr<Sequential> build_cnn(uint64_t seed) {
  for (const ModelFile& m : model_zoo())
    if (m.name == "cnn") return make_model("cnn", InputSpec{1, 28, 28, 10}, seed);
  auto m = std::make_shared<Sequential>();
  m->add("c1", std::make_shared<Conv2d>(1, 32, 3, 1, 1))
      .add("relu1", std::make_shared<ReLU>())
      .add("pool1", std::make_shared<MaxPool2d>(2))
      .add("c2", std::make_shared<Conv2d>(32, 64, 3, 1, 1))
      .add("relu2", std::make_shared<ReLU>())
      .add("pool2", std::make_shared<MaxPool2d>(2))
      .add("flatten", std::make_shared<Flatten>())
      .add("f1", std::make_shared<Linear>(64 * 7 * 7, 128))
      .add("relu3", std::make_shared<ReLU>())
      .add("f2", std::make_shared<Linear>(128, 10));
  m->initialize(seed);
  return m;
}

struct Batch {
  Tensor x, labels;
};

// Images in [0, 1) and labels drawn on the host, so both devices see the same bits.
std::vector<Batch> make_batches(int steps, int64_t batch) {
  std::vector<Batch> out;
  for (int s = 0; s < steps; ++s) out.push_back({fresh_tensor({batch, 1, 28, 28}, 0.0, 1.0), random_labels(batch, 10)});
  return out;
}

// The same from seeds of their own, whatever ran before: the batches of a comparison whose
// tolerance was measured on exactly these inputs.
std::vector<Batch> fixed_batches(int steps, int64_t batch, uint64_t seed) {
  std::vector<Batch> out;
  for (int s = 0; s < steps; ++s) {
    const Tensor x = nnlab_test::random_tensor({batch, 1, 28, 28}, seed + s, 7, DType::Float32, 0.0, 1.0);
    const RandomStream labels{seed + s, RandomPurpose::Shuffle, 3};
    std::vector<int32_t> y(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(labels.below(static_cast<uint64_t>(i), 10));
    out.push_back({x, Tensor::from_vector(y, {batch})});
  }
  return out;
}

// One SGD step (the cnn recipe: lr 0.01, momentum 0.9); returns the loss tensor (not read).
Tensor train_step(Sequential& model, Optimizer& opt, const Batch& b, Device dev) {
  Tensor logits = model.forward(b.x.to(dev));
  Tensor loss = cross_entropy(logits, b.labels.to(dev));
  loss.backward();
  opt.step();
  opt.zero_grad();
  return loss;
}

}  // namespace

TEST_CASE("gpu: the probe says usable and the report names the GPU and its libraries", "[gpu][device]") {
  const CudaStatus s = cuda_status();
  REQUIRE(s.usable);
  CHECK(s.device_count >= 1);
  const std::string report = cuda_device_report();
  CHECK_THAT(report, Catch::Contains("cuda:0: ") && Catch::Contains("compute capability") &&
                         Catch::Contains("cuBLAS ") && Catch::Contains("cuDNN ") && Catch::Contains("MiB"));
  CHECK_THAT(gpu().name(), Catch::Contains("CUDA"));
}

TEST_CASE("gpu: asking for 1 TB says how much was asked, what is in use, and what to do", "[gpu][allocator]") {
  const size_t terabyte = 1000ull * 1000 * 1000 * 1000;
  CHECK_THROWS_WITH(gpu().allocator().allocate(terabyte),
                    Catch::Contains("out of memory on cuda:0") && Catch::Contains("asked for 1000000000000 bytes") &&
                        Catch::Contains("bytes are in use") && Catch::Contains("smaller --batch"));
  // The failed cudaMalloc left no error behind: the device still works.
  Tensor t = Tensor::full({10}, 2.0, DType::Float32, Device::cuda(0));
  CHECK(t.to_vector<float>()[9] == 2.0f);
}

TEST_CASE("gpu: no cudaMalloc and no growth after the second training step", "[gpu][allocator]") {
  const Device dev = Device::cuda(0);
  auto model = build_cnn(11);
  model->to(dev);
  SGD opt(model->parameters(), SgdOptions{0.01, 0.9});
  const std::vector<Batch> batches = make_batches(6, 64);
  train_step(*model, opt, batches[0], dev);
  train_step(*model, opt, batches[1], dev).item();
  const AllocatorStats after_two = gpu().allocator().stats();
  for (int s = 2; s < 6; ++s) train_step(*model, opt, batches[s], dev).item();
  const AllocatorStats after_six = gpu().allocator().stats();
  CHECK(after_six.underlying_allocs == after_two.underlying_allocs);
  CHECK(after_six.underlying_frees == after_two.underlying_frees);
  CHECK(after_six.current_bytes == after_two.current_bytes);
}

TEST_CASE("gpu: cnn trains identically on the CPU and on CUDA in strict float32", "[gpu][training]") {
  REQUIRE_FALSE(cuda_math_tf32());
  set_cuda_deterministic(true);  // no Winograd/FFT: the closest arithmetic to the CPU's
  const Device dev = Device::cuda(0);
  auto cpu_model = build_cnn(2024), gpu_model = build_cnn(2024);
  gpu_model->to(dev);
  SGD cpu_opt(cpu_model->parameters(), SgdOptions{0.01, 0.9});
  SGD gpu_opt(gpu_model->parameters(), SgdOptions{0.01, 0.9});
  // Inputs of their own, not the next ones of gpu_support.h's shared counter: which inputs this
  // test saw used to depend on how many tensors the tests before it drew, and on one such draw
  // a max-pool winner that the two devices' roundings decide differently (a near tie) sent
  // c2.bias 1.2e-4 apart. On these inputs the parameters end 3e-9 to 7e-8 apart (simulator,
  // 2026-11-27; on four other seeds up to 2.4e-6).
  const std::vector<Batch> batches = fixed_batches(20, 32, 1000);
  for (size_t s = 0; s < batches.size(); ++s) {
    const double cpu_loss = train_step(*cpu_model, cpu_opt, batches[s], Device::cpu()).item();
    const double gpu_loss = train_step(*gpu_model, gpu_opt, batches[s], dev).item();
    INFO("step " << s << ": cpu loss " << cpu_loss << ", cuda loss " << gpu_loss);
    REQUIRE(std::isfinite(gpu_loss));
    if (s == 0) CHECK(std::fabs(gpu_loss - cpu_loss) <= 1e-5 * std::fabs(cpu_loss));
  }
  set_cuda_deterministic(false);
  const auto cpu_params = cpu_model->named_parameters(), gpu_params = gpu_model->named_parameters();
  REQUIRE(cpu_params.size() == gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const std::vector<double> c = cpu_params[i].second.to_vector<double>();
    const std::vector<double> g = gpu_params[i].second.to_vector<double>();
    double diff = 0, norm = 0;
    for (size_t j = 0; j < c.size(); ++j) {
      diff += (g[j] - c[j]) * (g[j] - c[j]);
      norm += c[j] * c[j];
    }
    const double rel = std::sqrt(diff) / std::sqrt(norm);
    INFO(cpu_params[i].first << ": relative L2 difference after 20 steps " << rel);
    CHECK(rel <= 1e-4);
  }
}

// Mixed precision (layers/precision.h): the same bf16 model on both devices. Each op rounds
// its outputs to bf16 once on either, but a float32 sum in another order can round to the
// neighbouring bf16 value, so the two runs part by bf16's rounding, not by float32's.
TEST_CASE("gpu: cnn in bf16 trains on CUDA as on the CPU, with float32 masters", "[gpu][training][precision]") {
  set_cuda_deterministic(true);
  const Device dev = Device::cuda(0);
  auto cpu_model = build_cnn(2025), gpu_model = build_cnn(2025);
  gpu_model->to(dev);
  for (Sequential* m : {cpu_model.get(), gpu_model.get()}) m->set_compute_dtype(DType::BFloat16);
  SGD cpu_opt(cpu_model->parameters(), SgdOptions{0.01, 0.9});
  SGD gpu_opt(gpu_model->parameters(), SgdOptions{0.01, 0.9});
  const std::vector<Batch> batches = fixed_batches(10, 32, 2000);
  std::vector<double> cpu_losses, gpu_losses;
  for (const Batch& b : batches) {
    cpu_losses.push_back(train_step(*cpu_model, cpu_opt, b, Device::cpu()).item());
    gpu_losses.push_back(train_step(*gpu_model, gpu_opt, b, dev).item());
  }
  set_cuda_deterministic(false);
  require_allclose(gpu_losses, cpu_losses, 1e-2, 0.0, "bf16 losses, CUDA against the CPU");
  const auto cpu_params = cpu_model->named_parameters(), gpu_params = gpu_model->named_parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    INFO(gpu_params[i].first);
    CHECK(gpu_params[i].second.dtype() == DType::Float32);
    require_allclose(gpu_params[i].second.to_vector<double>(), cpu_params[i].second.to_vector<double>(), 2e-2, 1e-3,
                     "parameters after 10 bf16 steps");
  }
}
