// A training step's phases on the device's own clock, where the device keeps one (CUDA).
//
// On the CPU a phase's time is the host's clock around it: the kernels have run when their
// calls return. On CUDA the host only queues the kernels, so its clock would time the queueing.
// Instead the boundary after each phase is marked in the stream as the host passes it (a CUDA
// event, which makes the host wait for nothing); the GPU stamps each mark when it gets there,
// and the marks are read where the host waits for the device anyway: at a log line and at the
// epoch's end. A phase then holds the device's time from the end of the phase before to its
// own end: its kernels, and any wait for the host to queue them, so the phases of the steps
// between two reads add up to the device's time for those steps.
//
// Every step marks the boundaries in this order: after the data (the batch's copy or gather),
// after the forward pass, after the backward pass, after the all-reduce, after the optimizer.
// With --cuda-graphs the replay holds the whole step: its time is the forward's, and the
// backward's is what runs outside it (nothing, on a graphed step). A phase the step queued no
// work for (the backward of a graphed step, the all-reduce of one process) is marked without
// an event: it adds nothing to the device's queue and counts zero seconds.
#pragma once
#include <memory>
#include <vector>

#include "devices/backend.h"

namespace nnlab {

// The seconds of an epoch's steps, per phase.
struct PhaseSeconds {
  double data = 0, forward = 0, backward = 0, optimizer = 0;
  double allreduce = 0;  // distributed runs: time the step waited on the gradient all-reduce
};

enum class StepPhase { Data, Forward, Backward, Allreduce, Optimizer };

class PhaseEvents {
 public:
  // Null where the device has no clock of its own (the CPU): then the host's clock is right.
  static std::unique_ptr<PhaseEvents> on(Device device);

  explicit PhaseEvents(std::unique_ptr<DeviceTimeline> timeline);
  // Marks the end of `phase`; the phases of each step come in StepPhase's order. `empty`: no
  // work was queued in it (no event is recorded; the phase takes no time).
  void end_of(StepPhase phase, bool empty = false);
  // Waits for the device, adds the seconds of every phase marked since the last collect to
  // `into`, and starts again from now.
  void collect(PhaseSeconds& into);

 private:
  std::unique_ptr<DeviceTimeline> timeline_;
  int next_ = 0;  // the phase the next mark ends (StepPhase as an int), to check the order
  std::vector<StepPhase> marked_;  // the phase each event since the last collect ends
};

}  // namespace nnlab
