// The device's own clock (Backend::timeline, devices/cuda/timeline_cuda.cpp): marks are
// stamped when the device reaches them, not when the host queues them; a hold keeps the
// device from starting what is queued behind it until release(); and a host that waits for
// a held device is let go after a second, with the timeline saying so.
#include <chrono>
#include <thread>

#include "gpu/gpu_support.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

// The device time between two marks with the host asleep in between, held or not.
double seconds_across_a_host_pause(bool held) {
  std::unique_ptr<DeviceTimeline> timeline = gpu().timeline();
  REQUIRE(timeline);
  if (held) timeline->hold();
  timeline->mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  timeline->mark();
  const std::vector<double> at = timeline->read();
  REQUIRE(at.size() == 2);
  CHECK(at[0] == 0.0);
  CHECK_FALSE(timeline->expired());
  return at[1];
}

}  // namespace

TEST_CASE("gpu: timeline marks are stamped by the device; a hold queues the work behind it", "[gpu][timeline]") {
  // Not held: the device stamps each mark as it arrives, so the host's pause lies between them.
  CHECK(seconds_across_a_host_pause(false) >= 0.050);
  // Held: both marks wait behind the hold and are stamped one after the other once released.
  CHECK(seconds_across_a_host_pause(true) < 0.030);
}

TEST_CASE("gpu: timeline marks follow the work between them, and a host wait lets a hold go", "[gpu][timeline]") {
  const Tensor big = on_gpu(fresh_tensor({int64_t(1) << 22}));
  Tensor copy = Tensor::empty(big.shape(), DType::Float32, Device::cuda(0));
  {
    std::unique_ptr<DeviceTimeline> timeline = gpu().timeline();
    timeline->hold();
    timeline->mark();
    for (int i = 0; i < 4; ++i) gpu().copy(big, copy);
    timeline->mark();
    timeline->mark();
    const std::vector<double> at = timeline->read();
    REQUIRE(at.size() == 3);
    CHECK(at[1] > 0.0);     // four 16 MiB copies take time on any device
    CHECK(at[2] >= at[1]);  // an empty interval: nothing ran between the last two marks
    CHECK(at[2] - at[1] < at[1]);
  }
  std::unique_ptr<DeviceTimeline> timeline = gpu().timeline();
  timeline->hold();
  timeline->mark();
  const auto t0 = std::chrono::steady_clock::now();
  gpu().synchronize();  // waits for the held device: the hold gives up after a second
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(900));
  CHECK(timeline->expired());
  timeline->mark();
  CHECK(timeline->read().size() == 2);
}
