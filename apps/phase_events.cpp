#include "apps/phase_events.h"

#include "devices/registry.h"

namespace nnlab {

namespace {
constexpr int kPhases = 5;
}  // namespace

std::unique_ptr<PhaseEvents> PhaseEvents::on(Device device) {
  std::unique_ptr<DeviceTimeline> timeline = backend_for(device).timeline();
  if (!timeline) return nullptr;
  return std::make_unique<PhaseEvents>(std::move(timeline));
}

PhaseEvents::PhaseEvents(std::unique_ptr<DeviceTimeline> timeline) : timeline_(std::move(timeline)) {
  timeline_->mark();  // where the first step's data phase starts
}

void PhaseEvents::end_of(StepPhase phase, bool empty) {
  NNLAB_CHECK(static_cast<int>(phase) == next_, "PhaseEvents: phase ", static_cast<int>(phase),
              " marked out of order (expected ", next_, ")");
  if (!empty) {
    timeline_->mark();
    marked_.push_back(phase);
  }
  next_ = (next_ + 1) % kPhases;
}

void PhaseEvents::collect(PhaseSeconds& into) {
  NNLAB_CHECK(next_ == 0, "PhaseEvents: collected in the middle of a step");
  const std::vector<double> at = timeline_->read();
  NNLAB_CHECK(at.size() == marked_.size() + 1, "PhaseEvents: ", at.size(), " marks read for ", marked_.size(),
              " phases");
  // at[0] is the window's start; mark i ≥ 1 ends phase marked_[i − 1].
  for (size_t i = 1; i < at.size(); ++i) {
    const double seconds = at[i] - at[i - 1];
    switch (marked_[i - 1]) {
      case StepPhase::Data: into.data += seconds; break;
      case StepPhase::Forward: into.forward += seconds; break;
      case StepPhase::Backward: into.backward += seconds; break;
      case StepPhase::Allreduce: into.allreduce += seconds; break;
      case StepPhase::Optimizer: into.optimizer += seconds; break;
    }
  }
  marked_.clear();
  timeline_->restart();
  timeline_->mark();  // the next window starts here
}

}  // namespace nnlab
