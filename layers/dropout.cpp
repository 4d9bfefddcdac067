#include "layers/dropout.h"

#include <sstream>

#include "autograd/ops.h"

namespace nnlab {

namespace {
constexpr uint32_t kStepBits = 24;  // low bits of the stream: the step; high 8 bits: the layer
}

Dropout::Dropout(double p) : p_(p) {
  NNLAB_CHECK(p >= 0 && p < 1, "Dropout: the drop probability must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return dropout(x, p_, seed_, 0, false);
  return dropout(x, p_, seed_, stream_for(layer_id_, step_++), true);
}

std::string Dropout::describe() const {
  std::ostringstream os;
  os << "Dropout(p=" << p_ << ", inplace=False)";
  return os.str();
}

void Dropout::set_seed(uint64_t seed, uint32_t layer_id) {
  NNLAB_CHECK(layer_id < (1u << (32 - kStepBits)), "Dropout: layer id ", layer_id, " too large (at most ",
              (1u << (32 - kStepBits)) - 1, " Dropout layers in one model)");
  seed_ = seed;
  layer_id_ = layer_id;
  step_ = 0;
}

uint32_t Dropout::stream_for(uint32_t layer_id, uint64_t step) {
  return (layer_id << kStepBits) | static_cast<uint32_t>(step & ((1u << kStepBits) - 1));
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

}  // namespace nnlab
