#include "apps/distributed/data_parallel.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "devices/registry.h"

namespace nnlab {

namespace {
// DDP's default bucket is 25 MB for models of hundreds of MB; nnlab's zoo models hold 0.1 to a
// few MB of gradients, so buckets of 256 KiB give the overlap mode several to work with.
constexpr int64_t kBucketBytes = 256 << 10;

// FNV-1a over the bytes of every parameter: equal weights give equal checksums.
uint64_t weights_checksum(Sequential& model) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor host = p.device().is_cuda() ? p.to(Device::cpu()) : p;
    const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
    for (size_t i = 0; i < host.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

// The keys of two flat JSON objects whose values differ, as "key: A vs B" (nested objects
// are walked with dotted names).
void differences(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix,
                 std::vector<std::string>& out) {
  for (auto it = a.begin(); it != a.end(); ++it) {
    const std::string key = prefix + it.key();
    if (may_differ_between_ranks(key)) continue;
    const nlohmann::json other = b.contains(it.key()) ? b.at(it.key()) : nlohmann::json();
    if (it->is_object() && other.is_object())
      differences(*it, other, key + ".", out);
    else if (*it != other)
      out.push_back(fmt::format("{} {} vs {}", key, it->dump(), other.dump()));
  }
}
}  // namespace

uint64_t rank_dropout_seed(uint64_t seed, int rank) {
  return seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank));  // 2⁶⁴/φ: spreads the bits
}

bool may_differ_between_ranks(const std::string& key) {
  static const std::set<std::string> keys = {"threads",      "data_dir",       "log_interval",   "metrics",
                                             "metrics_every", "checkpoint_dir", "checkpoint_every", "pace_stdin"};
  return keys.count(key) > 0;
}

DataParallel::DataParallel(const World& world, std::vector<Tensor> params, AllReduceMode mode,
                           AllReduceChoice backend)
    : world_(world), reducer_(world, std::move(params), mode, kBucketBytes, std::move(backend)) {}

Device rank_device(Device resolved, const std::string& asked, const World& world) {
  if (!world.distributed() || !resolved.is_cuda() || asked.find(':') != std::string::npos) return resolved;
  return Device::cuda(world.local_rank() % cuda_status().device_count);
}

void DataParallel::check_same_start(const nlohmann::json& config, Sequential& model) const {
  const nlohmann::json mine = {{"config", config}, {"weights", weights_checksum(model)}};
  const std::vector<std::string> all = world_.gather_all(mine.dump());
  const nlohmann::json root = nlohmann::json::parse(all[0]);
  std::string report;
  for (size_t r = 1; r < all.size(); ++r) {
    const nlohmann::json theirs = nlohmann::json::parse(all[r]);
    std::vector<std::string> diff;
    differences(theirs["config"], root["config"], "", diff);
    // Same options, other weights: another nnlab version (or a changed model) on that host.
    if (diff.empty() && theirs["weights"] != root["weights"]) diff.push_back("its initial weights");
    if (diff.empty()) continue;
    report += fmt::format("{}rank {} differs from rank 0 in ", report.empty() ? "" : "; ", r);
    for (size_t i = 0; i < diff.size(); ++i) report += (i ? ", " : "") + diff[i];
  }
  if (!report.empty())
    throw CollectiveError("the ranks of this job were not started alike (" + report +
                          "); start every rank with the same options and the same nnlab");
}

void DataParallel::begin_step(int64_t whole, int64_t mine, const Tensor& loss, bool stop) {
  reducer_.begin(static_cast<double>(mine) / static_cast<double>(whole), loss, stop);
}

void DataParallel::broadcast_buffers(Sequential& model) const {
  for (auto& [name, buffer] : model.named_buffers()) {
    if (buffer.dtype() != DType::Float32) continue;  // counters (num_batches_tracked) advance alike on every rank
    Tensor host = buffer.device().is_cuda() ? buffer.to(Device::cpu()) : buffer;
    world_.broadcast(host.data<float>(), host.numel());
    if (buffer.device().is_cuda()) {
      Tensor target = buffer;  // a handle on the model's own storage
      backend_for(buffer.device()).copy(host.to(buffer.device()), target);
    }
  }
}

int64_t DataParallel::sum(int64_t count) const {
  double v = static_cast<double>(count);  // exact below 2⁵³
  world_.sum(&v, 1);
  return static_cast<int64_t>(v);
}

bool DataParallel::any(bool flag) const {
  double v = flag ? 1.0 : 0.0;
  world_.sum(&v, 1);
  return v > 0;
}

std::string DataParallel::describe(int64_t batch) const {
  const int n = world_.size();
  int64_t smallest = batch, largest = 0;
  for (int r = 0; r < n; ++r) {
    smallest = std::min(smallest, batch_slice(batch, r, n).size());
    largest = std::max(largest, batch_slice(batch, r, n).size());
  }
  const std::string split = smallest == largest
                                ? fmt::format("{} samples per rank", largest)
                                : fmt::format("{} to {} samples per rank, gradients weighted by each rank's share",
                                              smallest, largest);
  return fmt::format("data parallel: {}; global batch {} = {}; all-reduce: {}", world_.describe(), batch, split,
                     reducer_.describe());
}

}  // namespace nnlab
