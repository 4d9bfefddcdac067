// fuse_epilogues: the pass that groups a layer with the ReLU (and max-pool) after it into one
// op with an epilogue (autograd/ops.h's Epilogue), in every Sequential of a model:
//   Conv2d, MaxPool2d, ReLU  (or Conv2d, ReLU, MaxPool2d)  ->  conv2d with a max-pool + ReLU epilogue
//   Conv2d, ReLU  or  Linear, ReLU                         ->  conv2d / linear with a ReLU epilogue
//   MaxPool2d, ReLU  (either order)                        ->  max_pool2d_relu
// A ReLU between a layer and a max-pool goes to the pool: pooled, it is a quarter the size.
// max is monotonic, so maxpool(relu(x)) = relu(maxpool(x)) exactly, and the gradients are
// equal too (the same winner receives dy, masked by the same sign test): a fused model computes
// the unfused one's values and gradients bit for bit on the CPU, in one pass over the data
// where the layers one by one make two or three.
//
// The model keeps its children (and parameter names) as built; the pass sets each Sequential's
// run order, which forward(), `describe` and `nnlab explain` show ("c1+pool1+relu1"). The
// programs that run models (train, eval, predict, explain, sweep, compare) apply it once after
// building; `--check-numerics` runs the children one by one instead, so that a fault is named
// at its own layer.
#pragma once
#include <string>
#include <vector>

#include "layers/sequential.h"

namespace nnlab {

// Regroups every Sequential in `model` (nested ones included). Returns the number of groups.
int fuse_epilogues(Module& model);
// The groups the pass made, in run order: {"c1+pool1+relu1", "f1+relu3"}; `nnlab explain` lists them.
std::vector<std::string> fused_groups(const Module& model);

}  // namespace nnlab
