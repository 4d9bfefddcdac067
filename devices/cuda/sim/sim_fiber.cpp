// The simulator's fibers: a stack each, and a context switch written for x86-64.
//
// The switch follows the System V calling convention: a call may destroy every register
// but rbx, rbp, r12–r15, the stack pointer, and the SSE/x87 control words, so those are all
// a suspended fiber needs kept. nnlab_sim_switch_context(save, load) pushes them on the
// current stack, stores the stack pointer in *save, loads `load` as the new stack pointer
// and pops the other fiber's registers: its `ret` returns into that fiber where it once
// called the switch itself. A fresh fiber's stack is laid out as if it had called the switch
// from nnlab_sim_fiber_trampoline, which calls entry(arg) with the popped r12 and r13.
#include "devices/cuda/sim/sim_fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNLAB_SIM_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define NNLAB_SIM_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NNLAB_SIM_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define NNLAB_SIM_TSAN 1
#endif
#ifdef NNLAB_SIM_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifdef NNLAB_SIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

// For the frames a fiber never returns from: no_sanitize("thread") would still record their
// entry on ThreadSanitizer's shadow call stack (which then overflows after enough fiber runs);
// clang's disable_sanitizer_instrumentation leaves them out entirely.
#if defined(NNLAB_SIM_TSAN) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define NNLAB_SIM_NO_TSAN __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef NNLAB_SIM_NO_TSAN
#define NNLAB_SIM_NO_TSAN
#endif
// Under AddressSanitizer a call to a [[noreturn]] function (exit_to) is preceded by
// __asan_handle_no_return, which unpoisons the whole stack and asks the kernel, by a
// sigaltstack call, which stack it is on: a system call at every fiber's end, a fifth of the
// simulator's time in a step with barrier kernels. start() unpoisons a fiber's stack before
// each run anyway, so the frame that ends a fiber goes without instrumentation.
#ifdef NNLAB_SIM_ASAN
#define NNLAB_SIM_NO_ASAN __attribute__((no_sanitize("address")))
#else
#define NNLAB_SIM_NO_ASAN
#endif

#if !defined(__x86_64__)
#error "The CUDA simulator's fiber switch is written for x86-64 (devices/cuda/sim/sim_fiber.cpp)"
#endif

asm(R"(
  .pushsection .text
  .globl nnlab_sim_switch_context
  .hidden nnlab_sim_switch_context
  .type nnlab_sim_switch_context, @function
nnlab_sim_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r15
  pushq %r14
  pushq %r13
  pushq %r12
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r12
  popq %r13
  popq %r14
  popq %r15
  popq %rbx
  popq %rbp
  ret
  .size nnlab_sim_switch_context, .-nnlab_sim_switch_context

  .globl nnlab_sim_fiber_trampoline
  .hidden nnlab_sim_fiber_trampoline
  .type nnlab_sim_fiber_trampoline, @function
nnlab_sim_fiber_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size nnlab_sim_fiber_trampoline, .-nnlab_sim_fiber_trampoline
  .popsection
)");

extern "C" void nnlab_sim_switch_context(void** save_sp, void* load_sp);
extern "C" void nnlab_sim_fiber_trampoline();

namespace nnlab::sim {

namespace {

// The fiber that switched to the running one. Written by every fiber of the CPU thread, so
// a relaxed atomic: ThreadSanitizer must not read it as an order between CUDA threads.
thread_local std::atomic<Fiber*> t_previous{nullptr};

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

Fiber::Fiber() {
#ifdef NNLAB_SIM_TSAN
  tsan_fiber_ = __tsan_get_current_fiber();
#endif
}

Fiber::Fiber(size_t stack_bytes) {
  const size_t page = page_size();
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  void* mem = mmap(nullptr, stack_bytes_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::bad_alloc();
  mprotect(mem, page, PROT_NONE);  // a stack overflow faults here instead of corrupting memory
  stack_ = static_cast<char*>(mem) + page;
#ifdef NNLAB_SIM_TSAN
  // One ThreadSanitizer identity for the fiber's life: the scheduler never reuses a fiber
  // within a block, and orders each block after the last (sim_threads.cpp), so reusing the
  // identity in the next block hides nothing. Creating one per CUDA thread instead kept
  // thousands of dead thread states alive (12 GB for the GPU suite).
  tsan_fiber_ = __tsan_create_fiber(0);
  owns_tsan_fiber_ = true;
#endif
}

Fiber::~Fiber() {
#ifdef NNLAB_SIM_TSAN
  if (owns_tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (stack_) munmap(stack_ - page_size(), stack_bytes_ + page_size());
}

Fiber& Fiber::thread_fiber() {
  thread_local Fiber own;
  return own;
}

void Fiber::start(Entry entry, void* arg) {
  asan_fake_stack_ = nullptr;
#ifdef NNLAB_SIM_ASAN
  // A fiber abandoned at a divergent barrier left its frames' red zones on this stack.
  ASAN_UNPOISON_MEMORY_REGION(stack_, stack_bytes_);
#endif
  // The frame nnlab_sim_switch_context pops: control words, r12..r15, rbx, rbp, return
  // address; 64 bytes from a 16-byte aligned sp, so the trampoline's call is aligned.
  uintptr_t top = reinterpret_cast<uintptr_t>(stack_ + stack_bytes_) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top - 64 - 16);
  std::memset(frame, 0, 64);
  uint32_t mxcsr;
  uint16_t fpu_cw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_cw));
  std::memcpy(reinterpret_cast<char*>(frame), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(frame) + 4, &fpu_cw, 2);
  entry_ = entry;
  arg_ = arg;
  frame[1] = reinterpret_cast<uint64_t>(this);                         // r12: run_entry's argument
  frame[2] = reinterpret_cast<uint64_t>(&Fiber::run_entry);            // r13: called by the trampoline
  frame[7] = reinterpret_cast<uint64_t>(&nnlab_sim_fiber_trampoline);  // return address
  sp_ = frame;
}

void Fiber::switch_from(Fiber& from) {
  t_previous.store(&from, std::memory_order_relaxed);
#ifdef NNLAB_SIM_TSAN
  // Into a CUDA thread: it sees everything the scheduler did. Out of one: no ordering, so
  // two CUDA threads are ordered only by the barriers and atomics of the kernel itself.
  __tsan_switch_to_fiber(tsan_fiber_, from.stack_ ? __tsan_switch_to_fiber_no_sync : 0);
#endif
#ifdef NNLAB_SIM_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack_, stack_ ? stack_ : asan_bottom_,
                                 stack_ ? stack_bytes_ : asan_size_);
#endif
  nnlab_sim_switch_context(&from.sp_, sp_);
  from.annotate_arrival();
}

NNLAB_SIM_NO_TSAN void Fiber::exit_to(Fiber& to) {
  t_previous.store(this, std::memory_order_relaxed);
#ifdef NNLAB_SIM_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber_, to.stack_ ? 0 : __tsan_switch_to_fiber_no_sync);
#endif
#ifdef NNLAB_SIM_ASAN
  __sanitizer_start_switch_fiber(nullptr, to.stack_ ? to.stack_ : to.asan_bottom_,
                                 to.stack_ ? to.stack_bytes_ : to.asan_size_);
#endif
  void* discard = nullptr;
  nnlab_sim_switch_context(&discard, to.sp_);
  __builtin_unreachable();
}

// Runs in the fiber that has just been switched to (this), once it runs again.
void Fiber::annotate_arrival() {
#ifdef NNLAB_SIM_ASAN
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(asan_fake_stack_, &bottom, &size);
  Fiber* previous = t_previous.load(std::memory_order_relaxed);
  if (previous && !previous->stack_) {  // came from the thread's own stack: learn its bounds
    previous->asan_bottom_ = bottom;
    previous->asan_size_ = size;
  }
#endif
}

// Not instrumented for ThreadSanitizer: this frame never returns (the fiber leaves it by a
// switch), so an instrumented one would leave an entry on the fiber's shadow call stack at
// every run. The entry itself returns normally, keeping its entries balanced. Nor for
// AddressSanitizer, which has nothing to check here (NNLAB_SIM_NO_ASAN, above).
NNLAB_SIM_NO_TSAN NNLAB_SIM_NO_ASAN void Fiber::run_entry(void* self_raw) {
  auto* self = static_cast<Fiber*>(self_raw);
  self->annotate_arrival();
  self->entry_(self->arg_);
  self->exit_to(thread_fiber());
}

}  // namespace nnlab::sim
