// The non-finite flag (docs/design.md, "Numerical faults"): how a kernel that meets a NaN
// or ±inf tells the host *where* it happened without the host waiting for the device.
//
// The flag is an int32 tensor of two elements on the device, {step, source}, {0, 0} while all
// is well. A check that finds a bad value stores its mark there only if flag[0] is still 0,
// so a raised flag is never changed again and keeps naming the first fault. The optimizers'
// fused steps do nothing while flag[0] is non-zero, so no update follows the fault. The host
// reads the two numbers back when it chooses (once per log interval in the trainer).
#pragma once
#include <cstdint>

namespace nnlab {

constexpr int64_t kNonFiniteFlagSize = 2;  // {step, source}

// What a check stores when it finds a NaN or ±inf. step is 1-based (0 means "not raised");
// source is the caller's own code for what was checked (the trainer: 0 the loss, i + 1 the
// gradient of parameter i).
struct NonFiniteMark {
  int32_t step = 1;
  int32_t source = 0;
};

}  // namespace nnlab
