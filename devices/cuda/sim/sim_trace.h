// The simulator's timeline. With NNLAB_SIM_TRACE=FILE every item a stream runs (a kernel, a
// copy, a memset, a cuBLAS or cuDNN call, an NCCL sum, an event record or wait, a graph
// launch and each node inside it) is recorded with the time it started and ended on that
// stream's thread, and the process writes them at exit as a Chrome trace: open FILE in
// https://ui.perfetto.dev or chrome://tracing, one row per stream, one group per process;
// scripts/sim_timeline.py prints it as text and says how much NCCL time ran beside compute.
//
// "%p" in FILE becomes the process id, so each rank of an mpirun writes a file of its own.
// The times are CLOCK_MONOTONIC microseconds, one clock for every process of the machine, so
// the ranks' files line up when opened together.
//
// What it shows is the simulator's own concurrency: streams are CPU threads, so two streams
// run at once when the host has a core for each. It shows which work may overlap and in what
// order the events let it run, not how long a GPU would take.
#pragma once
#include <cuda_runtime.h>

#include <functional>

namespace nnlab::sim {

// Whether NNLAB_SIM_TRACE names a file (read once).
bool tracing();

// `work` wrapped so that running it records a span `name` of `category` ("kernel", "copy",
// "cublas", "cudnn", "nccl", "event", "graph", "host") on the row of the stream whose thread
// runs it (`fallback_row` when the caller's thread runs it: NNLAB_SIM_SYNC=1). `in_graph`:
// the work is a node of a graph being captured; it is recorded each time the graph runs.
std::function<void()> traced(const char* category, const char* name, int fallback_row, bool in_graph,
                             std::function<void()> work);

// A stream's thread says which row its spans go on: the stream's number in this process and
// its device. Numbers start at 1; `is_default` marks a device's legacy default stream.
void trace_rows_from_this_thread(int stream_number, int device, bool is_default);

}  // namespace nnlab::sim
