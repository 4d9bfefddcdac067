// Streams and events on the CUDA simulator. Each stream is a queue with a CPU thread of its
// own that runs the queued work (copies, memsets, kernels, cuBLAS and cuDNN calls) one after
// another, so the host returns from an asynchronous call before the work is done, exactly as
// on a GPU: a missing synchronisation, or a host buffer freed while a copy from it is still
// queued, shows up on the simulator too (AddressSanitizer reports the freed read).
// NNLAB_SIM_SYNC=1 runs every call at once on the caller's thread instead (for a debugger).
// A stream in capture (cudaStreamBeginCapture) queues nothing: its work is recorded into the
// graph being built, and a call that would wait for it is refused, as CUDA refuses it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "devices/cuda/sim/sim.h"
#include "devices/cuda/sim/sim_runtime_state.h"
#include "devices/cuda/sim/sim_trace.h"

struct CUstream_st {
  int device = 0;  // the device current when it was created: its work runs there
  int number = 0;  // 1, 2, ... in the order the process made its streams: its timeline row
  bool is_default = false;  // a device's legacy default stream
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  bool running = false;  // the worker is inside a queued item
  bool stop = false;
  std::thread worker;
  // Stream capture: the graph being recorded (null when not capturing), how, by whom, and
  // why it became invalid (empty while it is valid).
  std::shared_ptr<nnlab::sim::CapturedWork> capture;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  std::string capture_broken;
};

struct CUevent_st {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0, completed = 0;  // how many records were queued, and have run
  std::chrono::steady_clock::time_point when;
};

namespace nnlab::sim {

namespace {

bool run_synchronously() {
  static const bool sync = [] {
    const char* v = std::getenv("NNLAB_SIM_SYNC");
    return v && std::strcmp(v, "1") == 0;
  }();
  return sync;
}

std::mutex g_streams_mutex;
std::set<cudaStream_t>& all_streams() {
  static auto* streams = new std::set<cudaStream_t>();  // never destroyed: used at exit
  return *streams;
}

void worker_loop(cudaStream_t s) {
  keep_denormals_on_this_thread();
  trace_rows_from_this_thread(s->number, s->device, s->is_default);
  set_current_device(s->device);  // work checked on this thread is checked against the stream's device
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    s->changed.wait(lock, [&] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    s->running = true;
    lock.unlock();
    work();
    lock.lock();
    s->running = false;
    s->changed.notify_all();
  }
}

cudaStream_t make_stream(int device, bool is_default = false) {
  static std::atomic<int> made{0};
  auto* s = new CUstream_st();
  s->device = device;
  s->number = ++made;
  s->is_default = is_default;
  s->worker = std::thread(worker_loop, s);
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  all_streams().insert(s);
  return s;
}

// Each device's legacy default stream (nullptr in the API), made on first use.
cudaStream_t default_stream(int device) {
  static std::mutex mutex;
  static cudaStream_t streams[kMaxDevices] = {};
  std::lock_guard<std::mutex> lock(mutex);
  if (!streams[device]) streams[device] = make_stream(device, true);
  return streams[device];
}

cudaStream_t resolve(cudaStream_t s) { return s ? s : default_stream(current_device()); }

}  // namespace

bool is_stream(cudaStream_t s) {
  if (!s) return true;
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  return all_streams().count(s) != 0;
}

std::atomic<uint64_t> g_submissions{0}, g_host_waits{0};

SubmissionCounts submission_counts() { return {g_submissions.load(), g_host_waits.load()}; }

void enqueue(cudaStream_t stream, const char* category, const char* name, std::function<void()> work,
             bool counted) {
  cudaStream_t s = resolve(stream);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->capture) {  // recorded, not run (an invalidated capture records nothing more)
      if (!s->capture_broken.empty()) return;
      if (tracing() && counted) work = traced(category, name, s->number, true, std::move(work));
      s->capture->nodes.push_back(std::move(work));
      if (counted) ++s->capture->program_nodes;
      return;
    }
  }
  if (tracing() && counted) work = traced(category, name, s->number, false, std::move(work));
  if (counted) ++g_submissions;
  if (run_synchronously()) return work();
  std::lock_guard<std::mutex> lock(s->mutex);
  s->queue.push_back(std::move(work));
  s->changed.notify_all();
}

// ---- stream capture ---------------------------------------------------------------------

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream)
    return fail_call(cudaErrorStreamCaptureUnsupported,
                     "cudaStreamBeginCapture: the legacy default stream cannot be captured; use a stream of your own");
  if (!is_stream(stream)) return fail_call(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: not a stream");
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->capture)
    return fail_call(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is capturing already");
  stream->capture = std::make_shared<CapturedWork>();
  stream->capture_mode = mode;
  stream->capture_thread = std::this_thread::get_id();
  stream->capture_broken.clear();
  return sticky_or(cudaSuccess);
}

cudaError_t end_capture(cudaStream_t stream, std::shared_ptr<CapturedWork>* work) {
  if (!stream || !is_stream(stream)) return fail_call(cudaErrorInvalidResourceHandle, "cudaStreamEndCapture: not a stream");
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (!stream->capture) return fail_call(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  if (stream->capture_thread != std::this_thread::get_id() && stream->capture_mode != cudaStreamCaptureModeRelaxed)
    return fail_call(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture: called from another thread than "
                                                        "cudaStreamBeginCapture");
  std::shared_ptr<CapturedWork> done = std::move(stream->capture);
  stream->capture = nullptr;
  if (!stream->capture_broken.empty())
    return fail_call(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was invalidated by " +
                                                            stream->capture_broken);
  *work = std::move(done);
  return sticky_or(cudaSuccess);
}

cudaStreamCaptureStatus capture_status(cudaStream_t stream) {
  if (!stream) return cudaStreamCaptureStatusNone;
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (!stream->capture) return cudaStreamCaptureStatusNone;
  return stream->capture_broken.empty() ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusInvalidated;
}

// A call that would wait for captured work, or that the capture's mode forbids: the capture
// becomes invalid (cudaStreamEndCapture will say why) and the call fails, as on a GPU.
// `stream`: the stream it waits for; nullptr for a device-wide call (any capture counts).
// `unsafe_only`: an allocation, which only Global and (on the capturing thread) ThreadLocal
// captures forbid.
cudaError_t refuse_during_capture(const char* call, cudaStream_t stream, bool unsafe_only) {
  std::vector<cudaStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    if (stream && !all_streams().count(stream)) return cudaSuccess;
    if (stream) streams.push_back(stream);
    else streams.assign(all_streams().begin(), all_streams().end());
  }
  for (cudaStream_t s : streams) {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->capture) continue;
    if (unsafe_only && (s->capture_mode == cudaStreamCaptureModeRelaxed ||
                        (s->capture_mode == cudaStreamCaptureModeThreadLocal &&
                         s->capture_thread != std::this_thread::get_id())))
      continue;
    const std::string why = std::string(call) + (unsafe_only ? " (not permitted during a capture in this mode)"
                                                             : " (it would wait for work still being captured)");
    if (s->capture_broken.empty()) s->capture_broken = why;
    return fail_call(cudaErrorStreamCaptureUnsupported, why + ": the stream is capturing a graph");
  }
  return cudaSuccess;
}

namespace {
void wait_until_idle(cudaStream_t stream) {
  if (run_synchronously()) return;
  cudaStream_t s = resolve(stream);
  std::unique_lock<std::mutex> lock(s->mutex);
  s->changed.wait(lock, [&] { return s->queue.empty() && !s->running; });
}
}  // namespace

void drain(cudaStream_t stream) {
  ++g_host_waits;
  wait_until_idle(stream);
}

void drain_all() {
  ++g_host_waits;
  const int device = current_device();
  std::vector<cudaStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    for (cudaStream_t s : all_streams())
      if (s->device == device) streams.push_back(s);
  }
  for (cudaStream_t s : streams) wait_until_idle(s);
}

int stream_device(cudaStream_t stream) { return stream ? stream->device : current_device(); }

}  // namespace nnlab::sim

using nnlab::sim::sticky_or;

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  if (!stream) return nnlab::sim::fail_call(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: stream is null");
  *stream = nnlab::sim::make_stream(nnlab::sim::current_device());
  return sticky_or(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !nnlab::sim::is_stream(stream))
    return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a stream");
  nnlab::sim::drain(stream);
  {
    std::lock_guard<std::mutex> lock(nnlab::sim::g_streams_mutex);
    nnlab::sim::all_streams().erase(stream);
  }
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stop = true;
    stream->changed.notify_all();
  }
  stream->worker.join();
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!nnlab::sim::is_stream(stream))
    return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: not a stream");
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaStreamSynchronize", stream, false)) return e;
  nnlab::sim::drain(stream);
  return sticky_or(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaStreamQuery", stream, false)) return e;
  cudaStream_t s = nnlab::sim::resolve(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  return sticky_or(s->queue.empty() && !s->running ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = nnlab::sim::refuse_during_capture("cudaDeviceSynchronize", nullptr, false)) return e;
  nnlab::sim::drain_all();
  return sticky_or(cudaSuccess);
}

// ---- events: a record is queued work that stamps the time when the stream reaches it ----

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidValue, "cudaEventCreate: event is null");
  *event = new CUevent_st();
  return sticky_or(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaEventDestroy: event is null");
  cudaEventSynchronize(event);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaEventRecord: event is null");
  if (nnlab::sim::capture_status(stream) != cudaStreamCaptureStatusNone) {
    // Recorded into the graph: each replay stamps the time; nobody waits for it from outside.
    nnlab::sim::enqueue(stream, "event", "cudaEventRecord", [event] {
      std::lock_guard<std::mutex> lock(event->mutex);
      event->when = std::chrono::steady_clock::now();
    });
    return sticky_or(cudaSuccess);
  }
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    ticket = ++event->recorded;
  }
  nnlab::sim::enqueue(stream, "event", "cudaEventRecord", [event, ticket] {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->when = std::chrono::steady_clock::now();
    event->completed = ticket;
    event->changed.notify_all();
  });
  return sticky_or(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: event is null");
  ++nnlab::sim::g_host_waits;
  std::unique_lock<std::mutex> lock(event->mutex);
  const uint64_t wanted = event->recorded;
  event->changed.wait(lock, [&] { return event->completed >= wanted; });
  return sticky_or(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaEventQuery: event is null");
  std::lock_guard<std::mutex> lock(event->mutex);
  return sticky_or(event->completed >= event->recorded ? cudaSuccess : cudaErrorNotReady);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return nnlab::sim::fail_call(cudaErrorInvalidValue, "cudaEventElapsedTime: null argument");
  // One event against itself (0 ms) is allowed, as on a GPU: its mutex is taken once.
  std::unique_lock<std::mutex> a(start->mutex);
  std::unique_lock<std::mutex> b = start == end ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(end->mutex);
  if (start->completed < start->recorded || end->completed < end->recorded) return cudaErrorNotReady;
  if (!start->completed || !end->completed)
    return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return sticky_or(cudaSuccess);
}

// A stream waits for an event: queued work that blocks the stream's thread until the
// record it names has run on its own stream.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event) return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: event is null");
  uint64_t wanted;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    wanted = event->recorded;
  }
  nnlab::sim::enqueue(stream, "event", "cudaStreamWaitEvent", [event, wanted] {
    std::unique_lock<std::mutex> lock(event->mutex);
    event->changed.wait(lock, [&] { return event->completed >= wanted; });
  });
  return sticky_or(cudaSuccess);
}

// The stream's own thread calls the function when the stream reaches it, as CUDA's driver
// thread does; the stream's later work waits for it to return.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (!fn) return nnlab::sim::fail_call(cudaErrorInvalidValue, "cudaLaunchHostFunc: the function is null");
  if (!nnlab::sim::is_stream(stream))
    return nnlab::sim::fail_call(cudaErrorInvalidResourceHandle, "cudaLaunchHostFunc: not a stream");
  nnlab::sim::enqueue(stream, "host", "cudaLaunchHostFunc", [fn, user_data] { fn(user_data); });
  return sticky_or(cudaSuccess);
}
