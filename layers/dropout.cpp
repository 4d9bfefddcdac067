#include "layers/dropout.h"

#include <sstream>

#include "autograd/ops.h"
#include "core/philox.h"
#include "devices/registry.h"

namespace nnlab {

Dropout::Dropout(double p) : p_(p) {
  NNLAB_CHECK(p >= 0 && p < 1, "Dropout: the drop probability must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return dropout(x, p_, seed_, 0, false);
  if (!step_count_.defined() || step_count_.device() != x.device())
    step_count_ = Tensor::full({}, static_cast<double>(step()), DType::Int32, x.device());
  // The mask of this step, then the count advanced, both on the device (a graph replays both).
  Tensor y = dropout(x, p_, seed_, stream_for(layer_id_, 0), true, &step_count_);
  backend_for(step_count_.device()).increment_counter(step_count_);
  return y;
}

uint64_t Dropout::step() const {
  if (!step_count_.defined()) return step_;
  return static_cast<uint64_t>(step_count_.to(Device::cpu()).to_vector<int32_t>()[0]);
}

void Dropout::set_step(uint64_t step) {
  NNLAB_CHECK(step < (1ull << 31), "Dropout: step count ", step, " is beyond 2³¹ − 1");
  step_ = step;
  // A count already on the device is written there (a kernel, not an upload: a CUDA graph may
  // have recorded its address).
  if (step_count_.defined()) backend_for(step_count_.device()).fill(step_count_, static_cast<double>(step));
}

std::string Dropout::describe() const {
  std::ostringstream os;
  os << "Dropout(p=" << p_ << ", inplace=False)";
  return os.str();
}

void Dropout::set_seed(uint64_t seed, uint32_t layer_id) {
  NNLAB_CHECK(layer_id < (1u << (32 - kDropoutStepBits)), "Dropout: layer id ", layer_id, " too large (at most ",
              (1u << (32 - kDropoutStepBits)) - 1, " Dropout layers in one model)");
  seed_ = seed;
  layer_id_ = layer_id;
  step_ = 0;
  step_count_ = Tensor();
}

uint32_t Dropout::stream_for(uint32_t layer_id, uint64_t step) {
  return dropout_stream(layer_id << kDropoutStepBits, static_cast<int32_t>(step & ((1u << kDropoutStepBits) - 1)));
}

namespace {
void seed_dropout_from(Module& m, uint64_t seed, uint32_t& next_id) {
  if (auto* d = dynamic_cast<Dropout*>(&m)) d->set_seed(seed, next_id++);
  for (const auto& [name, child] : m.children()) seed_dropout_from(*child, seed, next_id);
}
}  // namespace

void seed_dropout(Module& model, uint64_t seed) {
  uint32_t next_id = 0;
  seed_dropout_from(model, seed, next_id);
}

namespace {
void collect_dropout(const Module& m, std::vector<Dropout*>& out) {
  if (auto* d = dynamic_cast<Dropout*>(const_cast<Module*>(&m))) out.push_back(d);
  for (const auto& [name, child] : m.children()) collect_dropout(*child, out);
}
}  // namespace

std::vector<Dropout*> dropout_layers(const Module& model) {
  std::vector<Dropout*> out;
  collect_dropout(model, out);
  return out;
}

}  // namespace nnlab
