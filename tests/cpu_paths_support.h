// Helpers for the CPU tests that run one check down every kernel path: under each instruction
// set the CPU has, and a check that the kernel log saw each path the cases were chosen to reach.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>

#include "devices/cpu/cpu_isa.h"

namespace nnlab_test {

// body(isa) under AVX2, then AVX-512, each where this CPU has it; the choice is restored after.
template <typename Body>
void for_each_cpu_isa(Body&& body) {
  const nnlab::CpuIsa saved = nnlab::cpu_isa();
  for (nnlab::CpuIsa isa : {nnlab::CpuIsa::avx2, nnlab::CpuIsa::avx512}) {
    if (!nnlab::cpu_supports(isa)) continue;
    nnlab::set_cpu_isa(isa);
    body(isa);
  }
  nnlab::set_cpu_isa(saved);
}

// Every name in `paths` is part of some kernel family the log recorded (KernelCall::family).
inline void check_paths_seen(const std::set<std::string>& families, std::initializer_list<const char*> paths) {
  std::string seen;
  for (const std::string& f : families) seen += f + "; ";
  INFO("kernels seen: " << seen);
  for (const char* path : paths)
    CHECK(std::any_of(families.begin(), families.end(),
                      [&](const std::string& f) { return f.find(path) != std::string::npos; }));
}

}  // namespace nnlab_test
