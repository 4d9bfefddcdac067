// The NCCL all-reduce of CUDA gradients (apps/distributed/grad_reducer.h, devices/nccl_comm.h)
// on a communicator of one rank, which one GPU allows: the gradients are scaled into device
// buckets, summed by ncclAllReduce and copied back, with the loss and stop extras beside them.
// Where the CUDA backend has no NCCL (a toolkit without it) the choice must fall
// back to MPI and a forced NCCL must be refused, naming why.
#include <string>
#include <vector>

#include "apps/distributed/grad_reducer.h"
#include "apps/distributed/world.h"
#include "devices/nccl_comm.h"
#include "gpu/gpu_support.h"

using namespace nnlab;

namespace {

// Gradients of shapes (3, 4) and (5) and a parameter without one, all on cuda:0.
struct Model {
  std::vector<Tensor> params;
  std::vector<Tensor> grads;  // host copies of the gradients set
  Model() {
    for (const Shape& shape : {Shape{3, 4}, Shape{5}, Shape{2, 2}})
      params.push_back(gputest::on_gpu(gputest::fresh_tensor(shape)));
    set_gradients();
  }
  void set_gradients() {
    grads.clear();
    for (size_t k = 0; k < 2; ++k) {
      grads.push_back(gputest::fresh_tensor(params[k].shape()));
      params[k].set_grad(gputest::on_gpu(grads[k]));
    }
  }
};

// w · t on the host (w a power of two: the product is exact, as on the GPU).
Tensor times(const Tensor& t, float w) {
  Tensor out = t.clone();
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= w;
  return out;
}

}  // namespace

TEST_CASE("gpu: NCCL all-reduce of CUDA gradients on one rank", "[gpu][distributed][nccl]") {
  const World& world = World::get();
  const std::string missing = nccl_unavailable_reason();
  if (!missing.empty()) {
    WARN("NCCL cannot be used here: " << missing << "; checking the fall-back to MPI instead");
    const AllReduceChoice c = decide_allreduce_backend(world, Device::cuda(0), AllReduceBackendRequest::automatic);
    CHECK(c.backend == AllReduceBackend::mpi);
    CHECK(describe(c) == "MPI on host memory (CUDA gradients are staged through it): " + missing);
    CHECK_THROWS_WITH(decide_allreduce_backend(world, Device::cuda(0), AllReduceBackendRequest::nccl),
                      Catch::Contains("--allreduce-backend nccl cannot be used: " + missing));
    return;
  }
  const AllReduceMode mode = GENERATE(AllReduceMode::step, AllReduceMode::overlap);
  Model model;
  // overlap with 16-byte buckets: each gradient in a bucket (and an NCCL call) of its own.
  GradientReducer reducer(world, model.params, mode, 16,
                          decide_allreduce_backend(world, Device::cuda(0), AllReduceBackendRequest::automatic));
  INFO(reducer.describe());
  REQUIRE(reducer.backend() == AllReduceBackend::nccl);
  CHECK_THAT(reducer.describe(),
             Catch::Contains("; NCCL 2.") && Catch::Contains(" on device memory (every rank has a GPU of its own)"));
  CHECK(reducer.bucket_count() == (mode == AllReduceMode::step ? 1u : 3u));

  // Step 1: share 1/4, no loss (a rank without samples), asked to stop. One rank: sum = own.
  reducer.begin(0.25, Tensor(), true);
  reducer.finish();
  for (size_t k = 0; k < 2; ++k)
    gputest::require_allclose(model.params[k].grad().to(Device::cpu()), times(model.grads[k], 0.25f), 0, 0,
                              "gradient " + std::to_string(k) + " · 1/4");
  REQUIRE(model.params[2].grad().defined());  // none before: it gets the (zero) sum
  gputest::require_allclose(model.params[2].grad().to(Device::cpu()), Tensor::zeros({2, 2}), 0, 0, "no gradient");
  CHECK(reducer.global_loss() == 0.0);
  CHECK(reducer.stop_requested());

  // Step 2: fresh gradients, share 1, a loss of 1.5: nothing of step 1 may leak in.
  model.set_gradients();
  reducer.begin(1.0, Tensor::full({}, 1.5, DType::Float32, Device::cuda(0)), false);
  reducer.finish();
  for (size_t k = 0; k < 2; ++k)
    gputest::require_allclose(model.params[k].grad().to(Device::cpu()), model.grads[k], 0, 0,
                              "gradient " + std::to_string(k) + " · 1");
  CHECK(reducer.global_loss() == 1.5);
  CHECK_FALSE(reducer.stop_requested());
}

TEST_CASE("gpu: an NCCL communicator refuses a buffer off its device, naming it", "[gpu][nccl]") {
  if (!nccl_unavailable_reason().empty()) {
    CHECK_THROWS_WITH(NcclCommunicator::make_unique_id(), Catch::StartsWith("NCCL cannot be used: "));
    return;
  }
  NcclCommunicator comm(NcclCommunicator::make_unique_id(), 1, 0, Device::cuda(0));
  Tensor on_cpu = Tensor::zeros({4});
  CHECK_THROWS_WITH(comm.sum_in_place(on_cpu), "nccl_sum: the buffer is on cpu, the NCCL communicator on cuda:0");
  Tensor ones = Tensor::full({1000}, 1.0, DType::Float32, Device::cuda(0));
  comm.sum_in_place(ones);  // one rank: the sum is the buffer itself
  comm.join();
  CHECK(ones.to(Device::cpu()).to_vector<float>() == std::vector<float>(1000, 1.0f));
}
