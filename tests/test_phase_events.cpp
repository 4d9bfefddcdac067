// A step's phases on the device's clock (apps/phase_events.h): each mark ends one phase of a
// step, in order; a collect adds each phase's share of the time between marks. Driven here by
// a timeline whose "device" stamps known times, so the attribution is exact.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "apps/phase_events.h"

using namespace nnlab;

namespace {

// Stamps mark i at times[i] seconds (from the first); counts how often it was read and restarted.
class ScriptedTimeline final : public DeviceTimeline {
 public:
  explicit ScriptedTimeline(std::vector<double> times, int* reads) : times_(std::move(times)), reads_(reads) {}
  void hold() override {}
  void release() override {}
  void mark() override { ++marks_; }
  std::vector<double> read() override {
    ++*reads_;
    std::vector<double> out(times_.begin() + used_, times_.begin() + used_ + marks_);
    for (double& t : out) t -= times_[used_];
    used_ += marks_;
    return out;
  }
  bool expired() const override { return false; }
  void restart() override { marks_ = 0; }

 private:
  std::vector<double> times_;
  size_t used_ = 0, marks_ = 0;
  int* reads_;
};

}  // namespace

TEST_CASE("PhaseEvents gives each phase the device's time from the phase before", "[trainer][phases]") {
  int reads = 0;
  // window 1: start 0; step 1 ends data 1, forward 3, backward 6, allreduce 6, optimizer 7;
  //           step 2 ends 8, 10, 13, 13, 14.  window 2: start 20; step 3 ends 21, 24, 29, 29, 30.
  std::vector<double> times = {0, 1, 3, 6, 6, 7, 8, 10, 13, 13, 14, 20, 21, 24, 29, 29, 30};
  PhaseEvents events(std::make_unique<ScriptedTimeline>(times, &reads));
  const StepPhase order[] = {StepPhase::Data, StepPhase::Forward, StepPhase::Backward, StepPhase::Allreduce,
                             StepPhase::Optimizer};
  for (int step = 0; step < 2; ++step)
    for (StepPhase p : order) events.end_of(p);
  PhaseSeconds phases;
  events.collect(phases);
  CHECK(reads == 1);
  CHECK(phases.data == Approx(1 + 1));
  CHECK(phases.forward == Approx(2 + 2));
  CHECK(phases.backward == Approx(3 + 3));
  CHECK(phases.allreduce == Approx(0));
  CHECK(phases.optimizer == Approx(1 + 1));
  // The next window starts at its own first mark: the host's pause between windows (a log
  // line) is no phase's.
  for (StepPhase p : order) events.end_of(p);
  events.collect(phases);
  CHECK(reads == 2);
  CHECK(phases.data == Approx(2 + 1));
  CHECK(phases.forward == Approx(4 + 3));
  CHECK(phases.backward == Approx(6 + 5));
  CHECK(phases.optimizer == Approx(2 + 1));
}

TEST_CASE("PhaseEvents refuses phases out of order and a collect inside a step", "[trainer][phases]") {
  int reads = 0;
  PhaseEvents events(std::make_unique<ScriptedTimeline>(std::vector<double>(20, 0.0), &reads));
  CHECK_THROWS_WITH(events.end_of(StepPhase::Forward), Catch::Contains("out of order"));
  events.end_of(StepPhase::Data);
  PhaseSeconds phases;
  CHECK_THROWS_WITH(events.collect(phases), Catch::Contains("in the middle of a step"));
}

TEST_CASE("PhaseEvents is not used on the CPU, whose host clock times the work", "[trainer][phases]") {
  CHECK(PhaseEvents::on(Device::cpu()) == nullptr);
}
