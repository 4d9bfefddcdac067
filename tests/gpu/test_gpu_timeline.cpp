// The device's own clock (Backend::timeline, devices/cuda/timeline_cuda.cpp): marks are
// stamped when the device reaches them, not when the host queues them; a hold keeps the
// device from starting what is queued behind it until release(); and a host that waits for
// a held device is let go after a second, with the timeline saying so. Last, the simulator's
// timeline of every stream's work (NNLAB_SIM_TRACE).
#include <algorithm>
#include <chrono>
#include <thread>

#include "cli_support.h"
#include "gpu/gpu_support.h"
#include "gpu/sim_trace_support.h"

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

// The simulator's timeline (NNLAB_SIM_TRACE, devices/cuda/sim/sim_trace.h) as a trainer's step
// writes it: every kind of work on its stream's row, one item at a time, a graph's nodes
// inside its launch; and a file that cannot be written refused at once.
TEST_CASE("gpu: the simulator's timeline records each stream's work in stream order", "[gpu][timeline][cli]") {
  if (!cuda_simulated()) {
    WARN("skipped: NNLAB_SIM_TRACE is the CUDA simulator's (this case runs in CI on it)");
    return;
  }
  const nnlab_test::TempDir dir("nnlab_sim_trace");
  const std::string train = std::string(NNLAB_CLI_PATH) + " train --device cuda --model cnn --batch 8 --epochs 1 "
                                                          "--test-images 16 --cuda-graphs on --max-steps ";
  const nnlab_test::CliResult r = nnlab_test::run_shell("NNLAB_SIM_TRACE=" + (dir / "run.%p.json") + " " + train + "3");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> files = nnlab_test::sim_trace_files(dir.path, "run.");
  REQUIRE(files.size() == 1);
  const nnlab_test::ProcessTrace t = nnlab_test::read_sim_trace(files[0]);
  CHECK(nnlab_test::overlaps_within_a_stream(t) == 0);
  const auto count = [&](const std::string& category, const std::string& name, bool in_graph) {
    return std::count_if(t.spans.begin(), t.spans.end(), [&](const nnlab_test::TraceSpan& s) {
      return s.category == category && (name.empty() || s.name == name) && s.in_graph == in_graph;
    });
  };
  CHECK(count("graph", "cudaGraphLaunch", false) >= 2);  // the step replays its graph
  CHECK(count("cudnn", "cudnnConvolutionForward", true) > 0);
  CHECK(count("kernel", "", true) > 0);
  CHECK(count("copy", "cudaMemcpyAsync", false) > 0);
  // A node of a graph runs inside a launch of it, on the launching stream.
  for (const nnlab_test::TraceSpan& node : t.spans) {
    if (!node.in_graph) continue;
    const bool inside = std::any_of(t.spans.begin(), t.spans.end(), [&](const nnlab_test::TraceSpan& launch) {
      return launch.category == "graph" && launch.row == node.row && launch.start <= node.start &&
             node.end <= launch.end;
    });
    INFO(node.name);
    CHECK(inside);
  }

  const nnlab_test::CliResult bad = nnlab_test::run_shell("NNLAB_SIM_TRACE=" + (dir / "missing/run.json") + " " + train + "1");
  INFO(bad.output);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, Catch::Contains("NNLAB_SIM_TRACE=") && Catch::Contains("cannot write"));
}
