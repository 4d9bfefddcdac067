// A pixel's way from its stored byte to the value a network sees, in one place for the host
// loader (datasets/dataloader.cpp) and for the gathers that build a batch on a device
// (Backend::gather_images): both give the same floats, bit for bit.
//
//   unit      x = p / 255, p the stored byte        (ToTensor)
//   normalise y = (x − mean[c]) / std[c]            (Normalize)
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace nnlab {

// p / 255 without a divide: q = p·(1/255), then one correction by its residual p − 255·q.
// For every byte this is the correctly rounded quotient, the division's own result (tested on
// all 256), where the product alone is off by one ulp for 126 of them. A loop of it vectorises
// into three multiply-adds per 8 or 16 bytes (a divide had made it 4% of an mlp step).
NNLAB_HOST_DEVICE float unit_from_byte(uint8_t p) {
  constexpr float kInverse = 1.0f / 255.0f;
  const float x = static_cast<float>(p), q = x * kInverse;
  return fmaf(fmaf(-q, 255.0f, x), kInverse, q);
}

// A float pixel is stored in [0, 1] already (image folders, synthetic data).
NNLAB_HOST_DEVICE float unit_from_stored(uint8_t p) { return unit_from_byte(p); }
NNLAB_HOST_DEVICE float unit_from_stored(float x) { return x; }

NNLAB_HOST_DEVICE float normalized(float x, float mean, float std) { return (x - mean) / std; }

}  // namespace nnlab
