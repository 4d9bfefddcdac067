#include "apps/distributed/grad_reducer.h"

#include <chrono>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "apps/wall_time.h"
#include "autograd/engine.h"
#include "devices/registry.h"

namespace nnlab {

namespace {
using Clock = std::chrono::steady_clock;
// Two more numbers to sum: this rank's share-weighted loss and its stop wish. The MPI path
// carries them at the end of its last bucket; the NCCL path sums them with MPI on the host.
constexpr int64_t kExtras = 2;
}  // namespace

BatchSlice batch_slice(int64_t b, int rank, int ranks) {
  return {b * rank / ranks, b * (rank + 1) / ranks};
}

AllReduceMode parse_allreduce_mode(const std::string& text) {
  if (text == "step") return AllReduceMode::step;
  if (text == "overlap") return AllReduceMode::overlap;
  fail("--allreduce must be step or overlap, got '", text, "'");
}

GradientReducer::GradientReducer(const World& world, std::vector<Tensor> params, AllReduceMode mode,
                                 int64_t bucket_bytes, AllReduceChoice backend)
    : world_(world), params_(std::move(params)), mode_(mode), backend_(std::move(backend)), bucket_of_(params_.size()) {
  // Backward meets the parameters roughly last layer first: buckets in that order fill first.
  // A bucket takes gradients while they fit in bucket_bytes; one larger than that gets a bucket
  // of its own (so the small last layers are summed while backward runs through a big one).
  const int64_t cap = mode_ == AllReduceMode::step ? INT64_MAX : bucket_bytes;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    if (buckets_.empty() || (bytes > 0 && bytes > cap - static_cast<int64_t>(params_[k].nbytes()))) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(b.floats);
    b.params.push_back(k);
    b.floats += params_[k].numel();
    bytes += static_cast<int64_t>(params_[k].nbytes());
    gradient_floats_ += params_[k].numel();
    bucket_of_[k] = buckets_.size() - 1;
    index_of_[params_[k].impl_ptr().get()] = k;
  }
  if (buckets_.empty()) buckets_.emplace_back();
  if (backend_.backend == AllReduceBackend::nccl) {
    NNLAB_CHECK(!params_.empty() && params_.front().device().is_cuda(), "the NCCL all-reduce needs CUDA gradients");
    const Device device = params_.front().device();
    for (Bucket& b : buckets_) b.device_data = Tensor::empty({b.floats}, DType::Float32, device);
    // Rank 0 names the rendezvous, MPI hands the name to all, every rank joins on its GPU.
    NcclCommunicator::UniqueId id{};
    if (world_.is_root()) id = NcclCommunicator::make_unique_id();
    world_.broadcast_bytes(id.data(), static_cast<int64_t>(id.size()));
    nccl_ = std::make_unique<NcclCommunicator>(id, world_.size(), world_.rank(), device);
    return;
  }
  for (Bucket& b : buckets_) b.data.resize(static_cast<size_t>(b.floats));
  buckets_.back().data.resize(buckets_.back().data.size() + kExtras);
}

GradientReducer::~GradientReducer() {
  if (mode_ == AllReduceMode::overlap) set_backward_hook(nullptr);
}

double GradientReducer::ring_bytes_per_rank() const {
  const double n = world_.size();
  return 2.0 * (n - 1.0) / n * static_cast<double>(gradient_bytes());
}

std::string GradientReducer::describe() const {
  const double mib = static_cast<double>(gradient_bytes()) / (1 << 20);
  return fmt::format("{:.2f} MiB of gradients in {} bucket{}, {}; {}", mib, buckets_.size(),
                     buckets_.size() == 1 ? "" : "s",
                     mode_ == AllReduceMode::overlap ? "each reduced during backward as soon as it is complete"
                                                     : "reduced once after backward",
                     nnlab::describe(backend_));
}

// How many graph nodes will hand each parameter a gradient this step: a bucket is complete
// when all of them have run. Found by walking the graph behind the loss once.
void GradientReducer::count_uses(const Tensor& loss) {
  uses_left_.assign(params_.size(), 0);
  if (!loss.defined() || !loss.grad_fn()) return;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> todo{loss.grad_fn().get()};
  while (!todo.empty()) {
    const Node* node = todo.back();
    todo.pop_back();
    if (!seen.insert(node).second) continue;
    for (const Tensor& input : node->inputs()) {
      if (!input.defined()) continue;
      if (input.grad_fn()) {
        todo.push_back(input.grad_fn().get());
      } else if (auto it = index_of_.find(input.impl_ptr().get()); it != index_of_.end()) {
        ++uses_left_[it->second];
      }
    }
  }
}

void GradientReducer::begin(double share, const Tensor& loss, bool stop) {
  share_ = share;
  local_loss_ = loss.defined() ? loss.item() : 0.0;
  stop_ = stop;
  last_seconds_ = 0;
  next_launch_ = 0;
  arriving_.clear();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    buckets_[k].waiting = buckets_[k].params.size();
    buckets_[k].launched = false;
  }
  if (mode_ != AllReduceMode::overlap || !loss.defined()) return;
  count_uses(loss);
  // A parameter the graph never reaches gets no gradient; it counts as ready from the start.
  for (size_t k = 0; k < params_.size(); ++k)
    if (uses_left_[k] == 0) --buckets_[bucket_of_[k]].waiting;
  set_backward_hook([this](const Node& node, const std::vector<Tensor>&) { on_backward_node(node); });
}

// Called by the engine after each node's backward, *before* it adds that node's gradients to
// the leaves. So the gradients announced at one call are in .grad from the next call on.
void GradientReducer::on_backward_node(const Node& node) {
  const auto t0 = Clock::now();
  for (size_t k : arriving_) mark_ready(k);
  arriving_.clear();
  launch_ready_buckets();
  for (const Tensor& input : node.inputs()) {
    if (!input.defined() || input.grad_fn()) continue;
    auto it = index_of_.find(input.impl_ptr().get());
    if (it != index_of_.end() && --uses_left_[it->second] == 0) arriving_.push_back(it->second);
  }
  // MPI moves a non-blocking reduction along only inside MPI calls: give it one per node.
  for (size_t k = 0; k < next_launch_; ++k) world_.test(buckets_[k].pending);
  last_seconds_ += seconds_since(t0);
}

void GradientReducer::mark_ready(size_t param) { --buckets_[bucket_of_[param]].waiting; }

void GradientReducer::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].waiting == 0) launch(buckets_[next_launch_++]);
}

// data ← share · gradient, then the sum over ranks starts.
void GradientReducer::launch(Bucket& bucket) {
  bucket.launched = true;
  if (nccl_) return launch_on_device(bucket);
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    const Tensor& p = params_[bucket.params[j]];
    float* dst = bucket.data.data() + bucket.offsets[j];
    const Tensor grad = p.grad();
    if (!grad.defined()) {
      std::memset(dst, 0, sizeof(float) * static_cast<size_t>(p.numel()));
      continue;
    }
    const Tensor host = grad.device().is_cuda() ? grad.to(Device::cpu()) : grad;
    const float* src = host.data<float>();
    const auto w = static_cast<float>(share_);
    // numel() multiplies the extents out on every call: in the loop's condition it cost more
    // than the whole MPI sum (0.7 ms a cnn step, perf: shape_numel 8% of a rank's time).
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = w * src[i];
  }
  if (&bucket == &buckets_.back()) {
    float* extras = bucket.data.data() + bucket.data.size() - kExtras;
    extras[0] = static_cast<float>(share_ * local_loss_);
    extras[1] = stop_ ? 1.0f : 0.0f;
  }
  bucket.pending = world_.start_sum(bucket.data.data(), static_cast<int64_t>(bucket.data.size()));
}

Tensor GradientReducer::slot(const Bucket& bucket, size_t j) const {
  const Tensor& p = params_[bucket.params[j]];
  return bucket.device_data.rows(bucket.offsets[j], bucket.offsets[j] + p.numel()).view(p.shape());
}

// The same on the GPU: slot ← share · gradient by a kernel on the backend's stream, then
// ncclAllReduce on the communicator's stream once that kernel is done; the host goes on with
// backward at once, and so does the backend's stream.
void GradientReducer::launch_on_device(Bucket& bucket) {
  Backend& gpu = backend_for(nccl_->device());
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    Tensor dst = slot(bucket, j);
    const Tensor grad = params_[bucket.params[j]].grad();
    if (grad.defined())
      gpu.axpby(share_, grad, 0.0, dst);  // beta = 0 overwrites: the slot's old sums do not leak in
    else
      gpu.fill(dst, 0.0);
  }
  nccl_->sum_in_place(bucket.device_data);
}

void GradientReducer::unpack(const Bucket& bucket) {
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    Tensor& p = params_[bucket.params[j]];
    const float* src = bucket.data.data() + bucket.offsets[j];
    const Tensor grad = p.grad();
    if (grad.defined() && !grad.device().is_cuda()) {
      std::memcpy(grad.data<float>(), src, p.nbytes());  // in place: .grad is the engine's own buffer
      continue;
    }
    // A CUDA gradient goes back up; a rank without samples had none and gets the sum.
    Tensor host = Tensor::empty(p.shape());
    std::memcpy(host.data<float>(), src, p.nbytes());
    p.set_grad(p.device().is_cuda() ? host.to(p.device()) : host);
  }
}

// Queued after join(): the backend's stream waits for the sums, so the copies read them.
void GradientReducer::unpack_on_device(const Bucket& bucket) {
  Backend& gpu = backend_for(nccl_->device());
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    Tensor& p = params_[bucket.params[j]];
    Tensor grad = p.grad();  // a handle on the engine's own buffer: copied into in place
    if (!grad.defined()) {   // a rank without samples had none and gets the sum
      grad = Tensor::empty(p.shape(), DType::Float32, p.device());
      p.set_grad(grad);
    }
    gpu.copy(slot(bucket, j), grad);
  }
}

double GradientReducer::take_device_seconds() { return nccl_ ? nccl_->take_device_seconds() : -1.0; }

void GradientReducer::finish() {
  const auto t0 = Clock::now();
  if (mode_ == AllReduceMode::overlap) set_backward_hook(nullptr);
  // Whatever backward left (the last node's gradients, every bucket of a rank without samples).
  for (Bucket& b : buckets_) b.waiting = 0;
  launch_ready_buckets();
  if (nccl_) {
    // The extras are host numbers: one MPI sum while the GPU runs the NCCL reductions.
    double extras[kExtras] = {share_ * local_loss_, stop_ ? 1.0 : 0.0};
    world_.sum(extras, kExtras);
    nccl_->join();  // the copies below, on the backend's stream, read the sums
    for (const Bucket& b : buckets_) unpack_on_device(b);
    global_loss_ = extras[0];
    stop_ = extras[1] > 0;
  } else {
    for (Bucket& b : buckets_) {
      world_.wait(b.pending);
      unpack(b);
    }
    const float* extras = buckets_.back().data.data() + buckets_.back().data.size() - kExtras;
    global_loss_ = extras[0];
    stop_ = extras[1] > 0;
  }
  last_seconds_ += seconds_since(t0);
}

}  // namespace nnlab
