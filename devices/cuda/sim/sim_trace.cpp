// The simulator's timeline (sim_trace.h): spans kept in memory while the program runs, written
// as one Chrome trace-event file at exit.
#include "devices/cuda/sim/sim_trace.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nnlab::sim {

namespace {

// At most this many spans are kept (about 50 MB); later ones are counted and dropped.
constexpr size_t kMaxSpans = 1000000;

struct Span {
  const char* category;  // string literals: kernel names and API call names
  const char* name;
  int row;
  bool in_graph;
  double start_us, end_us;
};

struct Trace {
  std::mutex mutex;
  std::string path;
  FILE* file = nullptr;
  std::vector<Span> spans;
  size_t dropped = 0;
  std::map<int, std::string> row_names;
};

// Never destroyed: stream threads may still record while the process exits.
Trace& trace() {
  static auto* t = new Trace();
  return *t;
}

thread_local int t_row = 0;  // this thread's stream number; 0 on threads that are not a stream's

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Names are C identifiers or API names; escape anyway, so the file is JSON whatever comes.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string process_name() {
  const std::string pid = std::to_string(getpid());
  for (const char* rank : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(rank)) return "rank " + std::string(r) + " (pid " + pid + ")";
  return "pid " + pid;
}

void write_trace() {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  const int pid = static_cast<int>(getpid());
  FILE* f = t.file;
  std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  std::fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":%s}}", pid,
               json_string(process_name()).c_str());
  for (const auto& [row, name] : t.row_names)
    std::fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}", pid,
                 row, json_string(name).c_str());
  for (const Span& s : t.spans)
    std::fprintf(f,
                 ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":%s,\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                 "\"args\":{\"in_graph\":%s}}",
                 s.category, json_string(s.name).c_str(), pid, s.row, s.start_us, s.end_us - s.start_us,
                 s.in_graph ? "true" : "false");
  std::fprintf(f, "\n],\"otherData\":{\"spans_dropped\":%zu}}\n", t.dropped);
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed)
    std::fprintf(stderr, "nnlab (CUDA simulator): NNLAB_SIM_TRACE: writing %s failed: %s\n", t.path.c_str(),
                 std::strerror(errno));
  else if (t.dropped)
    std::fprintf(stderr, "nnlab (CUDA simulator): the trace %s kept the first %zu spans; %zu later ones were "
                 "dropped\n", t.path.c_str(), kMaxSpans, t.dropped);
  t.file = nullptr;
}

// The file is opened when tracing is first asked about, so a path that cannot be written
// ends the program at its first CUDA call, before any work is lost.
bool open_trace() {
  const char* value = std::getenv("NNLAB_SIM_TRACE");
  if (!value || !*value) return false;
  Trace& t = trace();
  std::string path = value;
  for (size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p", at))
    path.replace(at, 2, std::to_string(getpid()));
  t.path = path;
  t.file = std::fopen(path.c_str(), "w");
  if (!t.file) {
    std::fprintf(stderr, "nnlab (CUDA simulator): NNLAB_SIM_TRACE=%s: cannot write %s: %s\n", value, path.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  std::atexit(write_trace);
  return true;
}

void record(const Span& span) {
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!t.file) return;  // the file is written: the process is exiting
  if (t.spans.size() >= kMaxSpans) {
    ++t.dropped;
    return;
  }
  t.spans.push_back(span);
}

}  // namespace

bool tracing() {
  static const bool on = open_trace();
  return on;
}

std::function<void()> traced(const char* category, const char* name, int fallback_row, bool in_graph,
                             std::function<void()> work) {
  return [category, name, fallback_row, in_graph, work = std::move(work)] {
    const double start = now_us();
    work();
    record(Span{category, name, t_row ? t_row : fallback_row, in_graph, start, now_us()});
  };
}

void trace_rows_from_this_thread(int stream_number, int device, bool is_default) {
  t_row = stream_number;
  if (!tracing()) return;
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.row_names[stream_number] = "cuda:" + std::to_string(device) +
                               (is_default ? " default stream" : " stream " + std::to_string(stream_number));
}

}  // namespace nnlab::sim
