// NCCL between two devices (devices/nccl_comm.h): two ranks as two threads of this process,
// each on a GPU of its own, as NCCL allows. On the CUDA simulator (2 devices, tests/gpu/main.cpp)
// this runs the simulator's NCCL (devices/cuda/sim/sim_nccl.cpp), including what a GPU would
// only show as a hang; on a machine with two GPUs, NCCL itself. Skipped with one GPU.
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "devices/nccl_comm.h"
#include "gpu/gpu_support.h"
#ifdef NNLAB_CUDA_SIMULATOR
#include <cstdlib>

#include "devices/cuda/sim/sim.h"
#endif

using namespace nnlab;

namespace {

bool two_devices_with_nccl() {
  if (cuda_status().device_count < 2) {
    WARN("skipped: needs two CUDA devices (the simulator has them with NNLAB_SIM_DEVICES=2)");
    return false;
  }
  if (const std::string why = nccl_unavailable_reason(); !why.empty()) {
    WARN("skipped: NCCL cannot be used: " << why);
    return false;
  }
  return true;
}

// Runs rank(r) for r = 0, 1 on two threads at once (a communicator's set-up waits for every
// rank) and returns what each threw ("" for nothing).
std::vector<std::string> run_two_ranks(const std::function<void(int)>& rank) {
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        rank(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("gpu: NCCL on two devices sums in rank order and gives every rank the same bits", "[gpu][nccl][devices]") {
  if (!two_devices_with_nccl()) return;
  CHECK_THAT(nccl_version_text(), Catch::StartsWith("NCCL 2."));
  const NcclCommunicator::UniqueId id = NcclCommunicator::make_unique_id();
  // 2^21 + 5 floats: more than one chunk of the simulator's staging area (8 MiB a rank).
  const int64_t n = (int64_t(1) << 21) + 5;
  const std::vector<Tensor> inputs = {gputest::fresh_tensor({n}), gputest::fresh_tensor({n})};
  std::vector<std::vector<float>> results(2);
  const std::vector<std::string> errors = run_two_ranks([&](int rank) {
    const Device device = Device::cuda(rank);
    NcclCommunicator comm(id, 2, rank, device);
    Tensor data = inputs[size_t(rank)].to(device);
    comm.sum_in_place(data);  // x0 + x1
    comm.sum_in_place(data);  // 2 (x0 + x1): the second collective of the communicator
    comm.join();              // the backend's stream (the copy below) waits for the sums
    results[size_t(rank)] = data.to(Device::cpu()).to_vector<float>();
  });
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  const float* x0 = inputs[0].data<float>();
  const float* x1 = inputs[1].data<float>();
  size_t wrong = 0;
  for (size_t i = 0; i < size_t(n); ++i) wrong += results[0][i] != 2.0f * (x0[i] + x1[i]);
  CHECK(wrong == 0);
  CHECK(results[1] == results[0]);
}

TEST_CASE("gpu: NCCL refuses two ranks on one device, naming them", "[gpu][nccl][devices]") {
  if (!two_devices_with_nccl()) return;
  const NcclCommunicator::UniqueId id = NcclCommunicator::make_unique_id();
  const std::vector<std::string> errors =
      run_two_ranks([&](int rank) { NcclCommunicator comm(id, 2, rank, Device::cuda(0)); });
  for (const std::string& e : errors) {
    INFO(e);
    CHECK_THAT(e, Catch::Contains("ncclCommInitRank") && Catch::Contains("Duplicate GPU detected : rank 1 and rank 0"));
  }
}

#ifdef NNLAB_CUDA_SIMULATOR
// On a GPU both of these hang in NCCL for ever; the simulator names the ranks instead. The
// failure is the simulated device's sticky error, as a faulting kernel's is, so the test clears
// it after (a test-only call: a GPU's context would be lost).
TEST_CASE("gpu: on the simulator a mismatched or missing collective names the ranks", "[gpu][nccl][devices][simulator]") {
  if (!two_devices_with_nccl()) return;
  {
    const NcclCommunicator::UniqueId id = NcclCommunicator::make_unique_id();
    const std::vector<std::string> errors = run_two_ranks([&](int rank) {
      NcclCommunicator comm(id, 2, rank, Device::cuda(rank));
      Tensor data = Tensor::full({10 + rank}, 1.0, DType::Float32, Device::cuda(rank));
      comm.sum_in_place(data);
      comm.join();
      backend_for(Device::cuda(rank)).synchronize();
    });
    sim::clear_sticky_error_for_tests();
    for (const std::string& e : errors) {
      INFO(e);
      CHECK_THAT(e, Catch::Contains("ncclAllReduce #1 of 1") && Catch::Contains("meets another collective") &&
                        Catch::Contains("rank 0: #1 of 10 floats, rank 1: #1 of 11 floats"));
    }
  }
  {
    setenv("NNLAB_SIM_NCCL_TIMEOUT", "1", 1);
    const NcclCommunicator::UniqueId id = NcclCommunicator::make_unique_id();
    const std::vector<std::string> errors = run_two_ranks([&](int rank) {
      NcclCommunicator comm(id, 2, rank, Device::cuda(rank));
      if (rank == 1) return;  // rank 1 never sums
      Tensor data = Tensor::full({10}, 1.0, DType::Float32, Device::cuda(rank));
      comm.sum_in_place(data);
      comm.join();
      backend_for(Device::cuda(rank)).synchronize();
    });
    unsetenv("NNLAB_SIM_NCCL_TIMEOUT");
    sim::clear_sticky_error_for_tests();
    INFO(errors[0]);
    CHECK_THAT(errors[0], Catch::Contains("rank 0 of 2") && Catch::Contains("ncclAllReduce #1 of 10 floats") &&
                              Catch::Contains("rank 1 (at collective #0) did not come within 1 s"));
    CHECK(errors[1].empty());
  }
}
#endif
