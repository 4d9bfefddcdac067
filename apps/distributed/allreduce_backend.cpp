#include "apps/distributed/allreduce_backend.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "devices/nccl_comm.h"

namespace nnlab {

AllReduceBackendRequest parse_allreduce_backend(const std::string& text) {
  if (text == "auto") return AllReduceBackendRequest::automatic;
  if (text == "mpi") return AllReduceBackendRequest::mpi;
  if (text == "nccl") return AllReduceBackendRequest::nccl;
  fail("--allreduce-backend must be auto, nccl or mpi, got '", text, "'");
}

AllReduceChoice choose_allreduce_backend(AllReduceBackendRequest request, const AllReduceFacts& facts) {
  const bool forced = request == AllReduceBackendRequest::nccl;
  const auto refuse = [](const std::string& why) {
    throw CollectiveError("--allreduce-backend nccl cannot be used: " + why +
                          "; use --allreduce-backend auto (or mpi) to sum the gradients with MPI on host memory");
  };
  AllReduceChoice mpi{AllReduceBackend::mpi, facts.cuda_gradients, "", ""};
  if (request == AllReduceBackendRequest::mpi) {
    mpi.why = "--allreduce-backend mpi";
    return mpi;
  }
  if (!facts.cuda_gradients) {
    if (forced) refuse("NCCL sums CUDA memory, and this run's gradients are on the CPU (--device cuda puts them on a GPU)");
    mpi.why = "the gradients are on the CPU";
    return mpi;
  }
  if (!facts.nccl_missing.empty()) {
    if (forced) refuse(facts.nccl_missing);
    mpi.why = facts.nccl_missing;
    return mpi;
  }
  if (facts.most_ranks_on_one_gpu > 1) {
    const std::string why = std::to_string(facts.most_ranks_on_one_gpu) +
                            " ranks share one GPU, and NCCL needs a GPU of its own for every rank (it refuses two "
                            "ranks on one GPU: \"Duplicate GPU detected\")";
    if (forced) refuse(why + "; start at most as many ranks on each host as it has GPUs");
    mpi.why = why;
    return mpi;
  }
  return {AllReduceBackend::nccl, true, forced ? "--allreduce-backend nccl" : "every rank has a GPU of its own", ""};
}

std::string describe(const AllReduceChoice& choice) {
  if (choice.backend == AllReduceBackend::nccl) return choice.nccl_version + " on device memory (" + choice.why + ")";
  if (!choice.cuda_gradients) return "MPI on host memory";
  return "MPI on host memory (CUDA gradients are staged through it): " + choice.why;
}

namespace {
const char* request_name(AllReduceBackendRequest request) {
  switch (request) {
    case AllReduceBackendRequest::automatic: return "auto";
    case AllReduceBackendRequest::mpi: return "mpi";
    case AllReduceBackendRequest::nccl: return "nccl";
  }
  return "?";
}

// One rank's facts, as one line per field: its request, whether it trains on CUDA, why it
// cannot use NCCL ("" if it can) and its GPU's UUID (when it can).
std::string my_facts(Device device, AllReduceBackendRequest request) {
  std::string missing, uuid;
  // A CPU run never loads the CUDA backend (nor libnccl) just to answer this.
  if (device.is_cuda() && request != AllReduceBackendRequest::mpi) {
    missing = nccl_unavailable_reason();
    if (missing.empty()) uuid = gpu_uuid(device);
  }
  return std::string(request_name(request)) + "\n" + (device.is_cuda() ? "cuda" : "cpu") + "\n" + missing + "\n" + uuid;
}
}  // namespace

AllReduceChoice decide_allreduce_backend(const World& world, Device device, AllReduceBackendRequest request) {
  const std::vector<std::string> all = world.gather_all(my_facts(device, request));
  AllReduceFacts facts;
  facts.cuda_gradients = true;
  std::map<std::string, int> ranks_on_gpu;
  std::string asked0;
  for (size_t r = 0; r < all.size(); ++r) {
    std::istringstream in(all[r]);
    std::string asked, kind, missing, uuid;
    std::getline(in, asked);
    std::getline(in, kind);
    std::getline(in, missing);
    std::getline(in, uuid);
    if (r == 0) asked0 = asked;
    // Checked here, before any rank starts NCCL, which would wait forever for a rank that does not.
    if (asked != asked0)
      throw CollectiveError("the ranks of this job were not started alike (rank " + std::to_string(r) +
                            " differs from rank 0 in allreduce_backend \"" + asked + "\" vs \"" + asked0 +
                            "\"); start every rank with the same options and the same nnlab");
    facts.cuda_gradients = facts.cuda_gradients && kind == "cuda";
    if (!missing.empty() && facts.nccl_missing.empty())
      facts.nccl_missing = all.size() > 1 ? "rank " + std::to_string(r) + ": " + missing : missing;
    if (!uuid.empty()) facts.most_ranks_on_one_gpu = std::max(facts.most_ranks_on_one_gpu, ++ranks_on_gpu[uuid]);
  }
  AllReduceChoice choice = choose_allreduce_backend(request, facts);
  if (choice.backend == AllReduceBackend::nccl) choice.nccl_version = nccl_version_text();
  return choice;
}

}  // namespace nnlab
