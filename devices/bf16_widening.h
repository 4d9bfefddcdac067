// bf16 storage on a kernel that computes in float32: widen, run, round.
//
// A bf16 tensor (core/bfloat16.h) holds activations and weight copies in half the bytes of
// float32; its arithmetic is float32 on every device (the GPU's bf16 tensor cores multiply
// bf16 values exactly and sum in float32, and its elementwise kernels load bf16, compute in
// float and round once on the store). A backend op with no bf16 kernel of its own runs exactly
// that way through `widened`: each bf16 operand copied to a float32 temporary (exact: every
// bf16 value is a float32 value), the float32 kernel run on the copies, and each output copied
// back, rounded to nearest even once. So every op rounds its outputs once, as a native bf16
// kernel does, and a device without such a kernel computes the same values as one that has it,
// up to the float32 order of the sums. What it does not give is bf16's speed: the copies are
// extra passes over memory. A backend calls it at the top of an override:
//
//   if (bf16::widened(*this, &CpuBackend::unary_forward, op, x, y)) return;
//
// Operands: `const Tensor&` and `const Tensor*` are inputs (widened); `Tensor&` and `Tensor*`
// are outputs (widened too, since some are read: an in-place bias, beta·C) and rounded back
// after the call; anything else (sizes, flags, int32 argmax) passes as it is.
#pragma once
#include <deque>
#include <functional>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace nnlab::bf16 {

namespace detail {

inline bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == DType::BFloat16; }

template <typename T>
bool is_bf16_operand(const T& a) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) return is_bf16(a);
  else if constexpr (std::is_same_v<U, Tensor*> || std::is_same_v<U, const Tensor*>) return a && is_bf16(*a);
  else return false;
}

// The float32 copies of one call's operands, and which of them go back as outputs.
class Widening {
 public:
  explicit Widening(DeviceMemory& memory) : memory_(memory) {}
  const Tensor& in(const Tensor& t) { return is_bf16(t) ? copies_.emplace_back(t.to(DType::Float32)) : t; }
  const Tensor* in(const Tensor* t) { return t ? &in(*t) : nullptr; }
  Tensor& out(Tensor& t) {
    if (!is_bf16(t)) return t;
    Tensor& copy = copies_.emplace_back(t.to(DType::Float32));
    outputs_.emplace_back(&t, &copy);
    return copy;
  }
  Tensor* out(Tensor* t) { return t ? &out(*t) : nullptr; }
  // Rounds every output's float32 result into its bf16 tensor.
  void round_outputs() {
    for (auto& [bf16, wide] : outputs_) memory_.cast(*wide, *bf16);
  }

  template <typename T>
  decltype(auto) operand(T&& a) {
    using U = std::remove_reference_t<T>;
    if constexpr (std::is_same_v<U, const Tensor> || std::is_same_v<U, const Tensor* const> ||
                  std::is_same_v<U, const Tensor*>)
      return in(a);
    else if constexpr (std::is_same_v<U, Tensor> || std::is_same_v<U, Tensor*> || std::is_same_v<U, Tensor* const>)
      return out(a);
    else
      return std::forward<T>(a);
  }

 private:
  DeviceMemory& memory_;
  std::deque<Tensor> copies_;  // a deque: references to its elements stay valid as it grows
  std::deque<std::pair<Tensor*, Tensor*>> outputs_;
};

}  // namespace detail

// Whether every operand present (non-null and defined) is bf16: a backend's own bf16 kernel
// takes all of its operands in bf16, and any other mix goes through `widened`.
inline bool all(std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t && t->defined() && t->dtype() != DType::BFloat16) return false;
  return true;
}

// Runs (backend.*method)(args...) on float32 copies of its bf16 operands and rounds the
// outputs back, returning true, when any operand is bf16; returns false, having done
// nothing, when none is (the caller then runs its own kernel).
template <typename B, typename Method, typename... Args>
bool widened(B& backend, Method method, Args&&... args) {
  if (!(detail::is_bf16_operand(args) || ...)) return false;
  detail::Widening w(backend);
  std::invoke(method, backend, w.operand(std::forward<Args>(args))...);
  w.round_outputs();
  return true;
}

}  // namespace nnlab::bf16
