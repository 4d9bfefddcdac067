// One list per kernel family instead of three copies of every declaration.
//
// The kernels that gain from AVX-512 are compiled twice (CMakeLists.txt, NNLAB_ISA_SOURCES):
// once in namespace cpu::avx2, once in cpu::avx512. Callers use a third name, in cpu, that
// calls the set cpu_isa() chose (isa_dispatch.cpp). Each family header lists its kernels once,
// as X(name, (parameters), (arguments)) entries of a macro, e.g. pool2d.h's NNLAB_POOL_KERNELS
// lists
//
//   X(maxpool2d_forward, (const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax), (g, x, y, argmax))
//
// and these two macros turn the list into what C++ needs: the declarations in all three
// namespaces, and (in isa_dispatch.cpp only) the chooser's definitions. Every kernel returns
// void; parameters carry no default values (a definition may not repeat them).
#pragma once

// In namespace nnlab::cpu: the chooser's declaration, and each instruction set's.
#define NNLAB_ISA_DECLARE(name, params, args) \
  void name params;                           \
  namespace avx2 {                            \
  void name params;                           \
  }                                           \
  namespace avx512 {                          \
  void name params;                           \
  }

// Only the instruction sets' own: helpers one ISA file calls from another of the same set.
#define NNLAB_ISA_DECLARE_OWN(name, params, args) \
  namespace avx2 {                                \
  void name params;                               \
  }                                               \
  namespace avx512 {                              \
  void name params;                               \
  }

// In isa_dispatch.cpp, namespace nnlab::cpu: the chooser, a load and a predictable branch
// beside kernels that run for microseconds or more.
#define NNLAB_ISA_FORWARD(name, params, args) \
  void name params { use_avx512() ? avx512::name args : avx2::name args; }
