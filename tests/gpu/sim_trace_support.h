// Reading the CUDA simulator's timeline (NNLAB_SIM_TRACE, devices/cuda/sim/sim_trace.h) in the
// GPU tests: the spans of one process's trace file, and what ran beside what.
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace nnlab_test {

struct TraceSpan {
  std::string category, name;
  int row = 0;  // the stream
  double start = 0, end = 0;  // microseconds
  bool in_graph = false;
};

struct ProcessTrace {
  std::vector<TraceSpan> spans;
  std::vector<std::string> row_names;
};

inline ProcessTrace read_sim_trace(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  const nlohmann::json trace = nlohmann::json::parse(in);
  ProcessTrace t;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "thread_name") t.row_names.push_back(e.at("args").at("name"));
      continue;
    }
    const double start = e.at("ts");
    t.spans.push_back(TraceSpan{e.at("cat"), e.at("name"), e.at("tid"), start, start + e.at("dur").get<double>(),
                                e.at("args").at("in_graph")});
  }
  return t;
}

// The trace files in `dir` whose names start with `prefix` (one per process).
inline std::vector<std::string> sim_trace_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

inline bool is_compute(const TraceSpan& s) {
  return s.category == "kernel" || s.category == "cublas" || s.category == "cudnn";
}

// Microseconds of NCCL sums during which the same process computed on another stream.
inline double nccl_beside_compute(const ProcessTrace& t) {
  double both = 0;
  for (const TraceSpan& sum : t.spans) {
    if (sum.category != "nccl") continue;
    for (const TraceSpan& work : t.spans)
      if (is_compute(work) && work.row != sum.row)
        both += std::max(0.0, std::min(sum.end, work.end) - std::max(sum.start, work.start));
  }
  return both;
}

// A stream runs one item at a time: two items of one row that overlap, neither a node of a
// graph (which runs inside its launch), break stream order. Returns how many pairs do.
inline int overlaps_within_a_stream(const ProcessTrace& t) {
  std::vector<TraceSpan> top;
  for (const TraceSpan& s : t.spans)
    if (!s.in_graph) top.push_back(s);
  std::sort(top.begin(), top.end(), [](const TraceSpan& a, const TraceSpan& b) {
    return a.row != b.row ? a.row < b.row : a.start < b.start;
  });
  int broken = 0;
  for (size_t i = 1; i < top.size(); ++i)
    if (top[i].row == top[i - 1].row && top[i].start < top[i - 1].end) ++broken;
  return broken;
}

}  // namespace nnlab_test
