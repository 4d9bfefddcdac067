// Random data of a real data set's shape, for timing runs where the real files are absent
// (the PyTorch yardstick times cifar-cnn on random 3×32×32 data the same way). Pixels are
// U[0,1) and labels uniform over the classes, drawn from Philox, so a run is reproducible;
// nothing can be learned from it, so only its speed means anything.
#pragma once
#include <string>

#include "datasets/dataset.h"

namespace nnlab {

// "synthetic-cifar10": 50000 train / 10000 test images of 3×32×32, 10 classes.
Dataset synthetic_dataset(const std::string& name, const std::string& split);

}  // namespace nnlab
