// Products with an epilogue through cuBLASLt (gemm_lt_cuda.cpp): a Linear layer's bias and
// ReLU folded into its forward product, its bias gradient into the product for dW, so each
// is one library call where the plain path is a GEMM and one or two kernels more.
//
// The epilogues are named in nnlab's row-major terms; the row-major trick of gemm_plan.h turns
// C (m×n) = op(A)·op(B) into the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so a bias per column of C is
// cuBLASLt's bias per row of D (BIAS), and a sum over the rows of op(A) is its bias gradient
// of the second operand (BGRADB).
#pragma once
#include <cstdint>

#include "devices/cuda/cuda_context.h"

namespace nnlab::cuda {

enum class LtEpilogue : int {
  None,       // C = op(A)·op(B)
  Bias,       // C[i][j] = (op(A)·op(B))[i][j] + bias[j]             bias: n
  BiasRelu,   // C[i][j] = max(0, (op(A)·op(B))[i][j] + bias[j])     bias: n
  BiasGradA,  // C = op(A)·op(B), and bias[i] = Σ_k op(A)[i][k]      bias: m, written
};
const char* lt_epilogue_name(LtEpilogue e);

// Queues C = op(A)·op(B) with the epilogue on ctx's stream (row-major, contiguous) and returns
// true. `storage` is the dtype of A, B, C and the bias: float32 (TF32 or bf16 tensor cores under
// --math), or bf16 (float32 sums, the epilogue applied to them, C and a bias gradient rounded
// once). Returns false having queued nothing when cuBLASLt has no algorithm for it; the caller
// then takes its plain path. m, n, k ≥ 1.
bool lt_gemm(Context& ctx, LtEpilogue e, DType storage, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             const void* a, const void* b, void* c, void* bias);

}  // namespace nnlab::cuda
