// Dropout(p) (PyTorch's torch.nn.Dropout): in training, zeroes each element with
// probability p and scales the rest by 1/(1 − p); in evaluation, the identity.
//
// Keying of the masks. Each training forward draws its mask from the Philox stream
//   (seed, RandomPurpose::Dropout, stream = layer_id · 2²⁴ + (step mod 2²⁴), element index)
// where layer_id is the layer's position among the model's Dropout layers and step counts
// this layer's training forwards. The key depends on nothing but the seed, the model's
// structure and how many steps were taken, so the same --seed gives the same masks on the
// CPU and on CUDA, in every run. Position (set by seed_dropout) rather than a global
// construction counter, so two copies of one model in one process (`compare`) get the same
// keys. Masks would repeat after 2²⁴ ≈ 16.8 million steps of one layer.
//
// The step count lives on the device the layer runs on (an int32 scalar): the kernel reads it
// as it draws the mask and a second kernel adds one, with no host value in either launch, so a
// CUDA graph that recorded one training step draws a new mask at every replay, the one eager
// mode would draw at that step.
#pragma once
#include <vector>

#include "layers/module.h"

namespace nnlab {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string describe() const override;  // "Dropout(p=0.25, inplace=False)"

  // Sets the seed and the layer's id (< 256) and restarts the step count.
  void set_seed(uint64_t seed, uint32_t layer_id = 0);
  // The Philox stream of a (layer, step) pair, as defined above.
  static uint32_t stream_for(uint32_t layer_id, uint64_t step);

  double p() const { return p_; }
  uint64_t seed() const { return seed_; }
  uint32_t layer_id() const { return layer_id_; }
  // Training forwards so far (read back from the device); a resumed run restores it to
  // continue the same masks.
  uint64_t step() const;
  void set_step(uint64_t step);

 private:
  double p_;
  uint64_t seed_ = 0;
  uint32_t layer_id_ = 0;
  uint64_t step_ = 0;   // the count until the first training forward puts it on the device
  Tensor step_count_;   // int32 scalar on the device of the last training forward
};

// Seeds every Dropout layer of `model` with `seed`, giving them layer ids 0, 1, 2, ... in
// registration order (depth first). make_model calls it with the run's seed.
void seed_dropout(Module& model, uint64_t seed);

// The Dropout layers of `model` in seed_dropout's order (their layer ids).
std::vector<Dropout*> dropout_layers(const Module& model);

}  // namespace nnlab
