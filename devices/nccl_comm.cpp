#include "devices/nccl_comm.h"

#include "core/error.h"
#include "devices/cuda_loader.h"
#include "devices/registry.h"

namespace nnlab {

namespace {
// The plugin, known to have NCCL; an Error saying why not otherwise.
const CudaPlugin& nccl_plugin() {
  const std::string why = nccl_unavailable_reason();
  NNLAB_CHECK(why.empty(), "NCCL cannot be used: ", why);
  return *loaded_cuda_plugin();
}
}  // namespace

std::string nccl_unavailable_reason() {
  const CudaStatus status = cuda_status();  // loads the backend, handing over the math options
  if (!status.usable) return "no usable CUDA device: " + status.reason;
  const CudaPlugin* cuda = loaded_cuda_plugin();
  const std::string why = cuda->nccl_unavailable();
  NNLAB_CHECK(!why.empty() || cuda->nccl_sum, "the CUDA backend says it has NCCL but fills no NCCL slot");
  return why;
}

std::string nccl_version_text() {
  const int v = nccl_plugin().nccl_version();  // NCCL ≥ 2.9 encodes 2.28.9 as 22809
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         (cuda_simulated() ? " (simulated: its interface, summed through shared memory)" : "");
}

std::string gpu_uuid(Device device) {
  NNLAB_CHECK(device.is_cuda(), "gpu_uuid: ", device.str(), " is not a GPU");
  return nccl_plugin().gpu_uuid(device.index);
}

NcclCommunicator::UniqueId NcclCommunicator::make_unique_id() {
  UniqueId id{};
  nccl_plugin().nccl_unique_id(id.data());
  return id;
}

NcclCommunicator::NcclCommunicator(const UniqueId& id, int ranks, int rank, Device device)
    : plugin_(&nccl_plugin()), device_(device) {
  NNLAB_CHECK(device.is_cuda(), "NCCL all-reduces CUDA memory; ", device.str(), " is not a CUDA device");
  comm_ = plugin_->nccl_comm_create(id.data(), ranks, rank, device.index);
}

NcclCommunicator::~NcclCommunicator() { plugin_->nccl_comm_destroy(comm_); }

void NcclCommunicator::sum_in_place(Tensor& data) { plugin_->nccl_sum(comm_, data); }
void NcclCommunicator::join() { plugin_->nccl_join(comm_); }
double NcclCommunicator::take_device_seconds() { return plugin_->nccl_take_device_seconds(comm_); }

}  // namespace nnlab
