// Fibers for the CUDA simulator: each CUDA thread of a block runs on a fiber (its own stack),
// so a thread that reaches __syncthreads() can be suspended and resumed later, after every
// other thread of its block has reached the barrier too.
//
// A fiber switch saves the callee-saved registers and the stack pointer and loads another's
// (devices/cuda/sim/sim_fiber.cpp): about as cheap as a function call, which matters because
// a reduction kernel switches a few thousand times per block. The sanitizers are told about
// every switch, so AddressSanitizer follows the stacks and ThreadSanitizer sees each CUDA
// thread as its own thread.
#pragma once
#include <cstddef>

namespace nnlab::sim {

struct FiberStack;

class Fiber {
 public:
  using Entry = void (*)(void* arg);
  explicit Fiber(size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run entry(arg) from the top of its stack at the next switch to it;
  // when entry returns, the fiber switches back to its CPU thread's own stack for good.
  void start(Entry entry, void* arg);
  // Suspends the running code (the scheduler's own stack, or another fiber) and runs this
  // fiber from where it last stopped. `from` saves where to come back to.
  void switch_from(Fiber& from);
  // The calling CPU thread's own stack, as a fiber that can be switched back to.
  static Fiber& thread_fiber();
  // The last switch of a fiber whose entry is done: to `to`, never to return (the sanitizers
  // release the finished fiber's state).
  [[noreturn]] void exit_to(Fiber& to);

 private:
  Fiber();  // the thread's own stack
  void annotate_arrival();
  static void run_entry(void* self);  // a fresh fiber's first code, called by the trampoline

  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  void* sp_ = nullptr;          // saved stack pointer while not running
  char* stack_ = nullptr;       // mmap'ed, with a guard page at the low end
  size_t stack_bytes_ = 0;
  void* asan_fake_stack_ = nullptr;
  const void* asan_bottom_ = nullptr;  // for the thread fiber: learned at the first switch
  size_t asan_size_ = 0;
  void* tsan_fiber_ = nullptr;
  bool owns_tsan_fiber_ = false;
};

}  // namespace nnlab::sim
