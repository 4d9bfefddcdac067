// Which library sums a data-parallel run's gradients (apps/distributed/allreduce_backend.h):
// the rule as a function of what every rank reported, without a GPU or MPI.
#include <catch2/catch.hpp>

#include "apps/distributed/allreduce_backend.h"

using namespace nnlab;

namespace {
AllReduceFacts gpu_per_rank() {
  AllReduceFacts f;
  f.cuda_gradients = true;
  f.nccl_missing = "";
  f.most_ranks_on_one_gpu = 1;
  return f;
}
}  // namespace

TEST_CASE("allreduce backend: auto takes NCCL when the gradients are on CUDA, NCCL is built and each rank has a GPU",
          "[distributed]") {
  const AllReduceChoice c = choose_allreduce_backend(AllReduceBackendRequest::automatic, gpu_per_rank());
  CHECK(c.backend == AllReduceBackend::nccl);
  CHECK(c.why == "every rank has a GPU of its own");
}

TEST_CASE("allreduce backend: auto falls back to MPI on host memory and says why", "[distributed]") {
  SECTION("gradients on the CPU") {
    AllReduceFacts f = gpu_per_rank();
    f.cuda_gradients = false;
    const AllReduceChoice c = choose_allreduce_backend(AllReduceBackendRequest::automatic, f);
    CHECK(c.backend == AllReduceBackend::mpi);
    CHECK(describe(c) == "MPI on host memory");
  }
  SECTION("a CUDA backend without NCCL") {
    AllReduceFacts f = gpu_per_rank();
    f.nccl_missing = "rank 1: this nnlab's CUDA backend was built without NCCL";
    const AllReduceChoice c = choose_allreduce_backend(AllReduceBackendRequest::automatic, f);
    CHECK(c.backend == AllReduceBackend::mpi);
    CHECK(describe(c) ==
          "MPI on host memory (CUDA gradients are staged through it): rank 1: this nnlab's CUDA backend was built without NCCL");
  }
  SECTION("two ranks on one GPU") {
    AllReduceFacts f = gpu_per_rank();
    f.most_ranks_on_one_gpu = 2;
    const AllReduceChoice c = choose_allreduce_backend(AllReduceBackendRequest::automatic, f);
    CHECK(c.backend == AllReduceBackend::mpi);
    CHECK_THAT(describe(c), Catch::StartsWith("MPI on host memory (CUDA gradients are staged through it): 2 ranks "
                                              "share one GPU"));
  }
}

TEST_CASE("allreduce backend: mpi is taken when asked, even where NCCL would work", "[distributed]") {
  const AllReduceChoice c = choose_allreduce_backend(AllReduceBackendRequest::mpi, gpu_per_rank());
  CHECK(c.backend == AllReduceBackend::mpi);
  CHECK(describe(c) == "MPI on host memory (CUDA gradients are staged through it): --allreduce-backend mpi");
}

TEST_CASE("allreduce backend: nccl forced where it cannot work is one error naming the reason", "[distributed]") {
  CHECK(choose_allreduce_backend(AllReduceBackendRequest::nccl, gpu_per_rank()).backend == AllReduceBackend::nccl);
  AllReduceFacts cpu = gpu_per_rank(), missing = gpu_per_rank(), shared = gpu_per_rank();
  cpu.cuda_gradients = false;
  missing.nccl_missing = "this nnlab's CUDA backend was built without NCCL";
  shared.most_ranks_on_one_gpu = 3;
  for (const auto& [facts, reason] : {std::pair{cpu, "gradients are on the CPU"},
                                      std::pair{missing, "built without NCCL"},
                                      std::pair{shared, "3 ranks share one GPU"}}) {
    std::string message;
    try {
      choose_allreduce_backend(AllReduceBackendRequest::nccl, facts);
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK_THAT(message, Catch::StartsWith("--allreduce-backend nccl cannot be used: ") && Catch::Contains(reason) &&
                            Catch::EndsWith("use --allreduce-backend auto (or mpi) to sum the gradients with MPI on "
                                            "host memory"));
  }
  // A CollectiveError: every rank throws it alike and rank 0 alone prints it.
  CHECK_THROWS_AS(choose_allreduce_backend(AllReduceBackendRequest::nccl, shared), CollectiveError);
}

TEST_CASE("allreduce backend: the option's values", "[distributed]") {
  CHECK(parse_allreduce_backend("auto") == AllReduceBackendRequest::automatic);
  CHECK(parse_allreduce_backend("nccl") == AllReduceBackendRequest::nccl);
  CHECK(parse_allreduce_backend("mpi") == AllReduceBackendRequest::mpi);
  CHECK_THROWS_WITH(parse_allreduce_backend("gloo"), "--allreduce-backend must be auto, nccl or mpi, got 'gloo'");
}
