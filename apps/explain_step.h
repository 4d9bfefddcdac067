// nnlab explain's measurement (apps/cmd_explain.cpp prints it): one training step recorded
// node by node, with its shapes, FLOPs, bytes, kernel calls and time.
//
// Time of a node: on the CPU, host time with the device synchronised after each node; on
// CUDA, the device's own time from events (Backend::timeline), the whole step queued before
// the GPU starts it, so a node's time is its kernels' and not the host's launches.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "apps/run_variant.h"
#include "devices/kernel_log.h"
#include "layers/model_file.h"

namespace nnlab {

struct OpRecord {
  std::string phase, layer, op, shapes;
  double flops = 0, bytes = 0, seconds = 0;
  std::vector<KernelCall> calls;
  int mark = -1;  // its closing mark on the device's timeline (CUDA), -1 without one
};

// The step on the device's own clock (CUDA events), medians over plain steps.
struct DeviceTime {
  bool measured = false;
  double busy_seconds = 0;   // the step's work run back to back: queued whole before the GPU starts
  double span_seconds = 0;   // a plain step as training queues it: first kernel to last
  double graph_seconds = 0;  // forward and backward replayed as one CUDA graph (0: not capturable)
  double graph_busy_seconds = 0;
  size_t graph_nodes = 0;      // the nodes of that graph: what one cudaGraphLaunch hands the GPU
  // One replay's work items and host waits, where the device counts them (the simulator); -1
  // elsewhere.
  double graph_submissions = -1, graph_host_waits = -1;
  std::string graph_obstacle;  // why no graph was timed
  bool expired = false;        // the host waited for the device inside a held step
  int repeats = 0;             // steps behind each median
};

struct DeviceExplain {
  std::string label;
  std::vector<OpRecord> ops;
  double sgemm_gflops = 0, copy_gbytes = 0;  // the device's measured peaks
  bool cpu = false;
  double plain_step_seconds = 0;  // median of plain steps: no hooks, no kernel log, no per-node sync
  double kernel_seconds = 0;      // median of the kernel time of such steps (timed by the kernel log)
  int plain_repeats = 0;          // steps behind each of those two medians
  // One plain step's work items handed to the device and waits of the host inside it, where
  // the device counts them (the CUDA simulator); -1 elsewhere.
  double submissions = -1, host_waits = -1;
  DeviceTime device;
  std::vector<std::string> fused_groups;  // what fuse_epilogues ran as one op each
};

// One step of `info`'s model at `batch` on the variant's device, in its precision (fp32 when it
// names none), after two warm-up steps; on the CPU, then `repeats` plain steps and as many
// timed call by call, for the time outside the kernels.
DeviceExplain explain_on(const RunVariant& v, const ModelFile& info, int64_t batch, uint64_t seed, int repeats);

}  // namespace nnlab
