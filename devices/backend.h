// The kernel table: every computation nnlab does on a device goes through one of these
// methods. Only autograd/ops (and the engine's gradient accumulation, and the optimizers'
// fused steps) call it; layers never do.
//
// Conventions
// - Tensors are contiguous, row-major; shapes are written above each kernel.
// - Output tensors are allocated by the caller; kernels write them with `=`. Backward
//   kernels write fresh gradient buffers; only the engine accumulates (`+=`) into .grad
//   (through axpy).
// - Float kernels take float32 and, on the CPU, float64 (gradient checks run the same code).
// - Every kernel is optional for a backend: the default implementation throws an Error
//   naming the kernel and the device. There is no silent fallback to another device.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device_memory.h"
#include "core/nonfinite.h"
#include "core/tensor.h"

namespace nnlab {

enum class UnaryOp { Relu, Sigmoid, Tanh };
enum class BinaryOp { Add, Sub, Mul, Div };
const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);

// Convolution geometry, dilation 1, one group.
// x: (n, c, h, w)   w: (k, c, r, s)   y: (n, k, p, q)
// p = (h + 2·pad_h − r) / stride_h + 1,  q = (w + 2·pad_w − s) / stride_w + 1
struct Conv2dGeometry {
  int64_t n, c, h, w;   // input
  int64_t k, r, s;      // filters: k output channels of c × r × s
  int64_t stride_h, stride_w, pad_h, pad_w;
  int64_t p, q;         // output height, width
};

// Pooling window geometry. x: (n, c, h, w)  y: (n, c, p, q)
// relu (max-pool only): a ReLU after the pool, fused into it: y = max(window) if that is
// > 0, else 0 (NaN included, as relu), and such a window records argmax −1, no winner, so
// the backward gives none of its cells a gradient. That is exactly relu(maxpool(x)) and its
// gradient, in one pass instead of two, forward and backward.
struct Pool2dGeometry {
  int64_t n, c, h, w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int64_t p, q;
  bool relu = false;
};

// What a convolution's op does to its output before storing it (Backend::conv2d_forward).
struct ConvEpilogue {
  enum class Kind { None, Relu, ReluMaxPool };
  Kind kind = Kind::None;
  Pool2dGeometry pool{};  // ReluMaxPool: the max-pool of the convolution's output, pool.relu set
};

struct SgdParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  // CUDA, sgd_step_all: float32 (2) {lr, momentum} on the device, read by the kernel instead of
  // lr and momentum above, so a CUDA graph's replay uses its own step's values (written there
  // before each replay: Optimizer::stage_recorded_step). Every slot's first_step must be false.
  const Tensor* on_device = nullptr;
};

// One parameter of an SGD step over a list (Backend::sgd_step_all).
struct SgdSlot {
  Tensor* param;
  const Tensor* grad;
  Tensor* momentum_buf;  // undefined without momentum
  bool first_step;       // the buffer's first step: buf = g
  bool check_grad = false;   // check grad for a NaN or ±inf before any update (sgd_step_all)
  NonFiniteMark grad_mark{};  // what the skip flag then records for this gradient
};

struct AdamParams {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW: p ← p·(1 − lr·wd) instead of adding wd·p to the gradient
  // CUDA, adam_step_all: float32 (3 + 2·slots) on the device, {1 − lr·wd, β1, 1 − β1, then for
  // slot i: lr/(1 − β1ᵗ), √(1 − β2ᵗ)}, read by the kernel instead of lr, β1 and each slot's
  // step (see SgdParams::on_device).
  const Tensor* on_device = nullptr;
};

// Adam's scalars at step t (1-based), in double as PyTorch computes them (then rounded to the
// parameters' type): the step size lr/(1 − β1ᵗ) and √(1 − β2ᵗ).
struct AdamCorrections {
  double step_size, bc2_sqrt;
};
AdamCorrections adam_corrections(const AdamParams& hp, int64_t step);

// Backend::gemm's dtypes (above it), and its buffers large enough for m×k, k×n and m×n; else
// one error naming the three tensors.
void check_gemm_operands(int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& b, const Tensor& c);

// One parameter of an Adam step over a list (Backend::adam_step_all).
struct AdamSlot {
  Tensor* param;
  const Tensor* grad;
  Tensor* exp_avg;
  Tensor* exp_avg_sq;
  int64_t step;  // this parameter's step t, 1-based
};

// A device's work recorded once (Backend::capture) and replayed as one launch: a CUDA graph.
// A replay runs the recorded kernels on the recorded addresses with the recorded scalar
// arguments; inputs change between replays only through the memory the kernels read.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void replay() = 0;
  // The graph's nodes: kernels, copies, memsets and library calls (for launch counts).
  virtual size_t nodes() const = 0;
  // Device memory kept for the graph's own use while it lives (its private pool).
  virtual size_t pool_bytes() const = 0;
};

// What the host handed a device and how often it waited for it (Backend::device_counts).
struct DeviceCounts {
  uint64_t submissions = 0;  // kernels, copies, memsets, library calls, graph launches queued
  uint64_t host_waits = 0;   // calls that blocked the host until queued work had run
};

// Time on the device itself (Backend::timeline): marks recorded in the device's queue and
// stamped as the device reaches them (CUDA events), read once at the end, so timing adds no
// wait to the work it times. hold() keeps the device from starting any work queued after it
// until release(): the host queues a whole step first, so the time between two marks is the
// device's own time for the work between them, without the gaps where it waited for the
// host's next launch. A hold lets go by itself after a second (the host waited for the
// device inside the held work); expired() then says the marks include that wait.
class DeviceTimeline {
 public:
  virtual ~DeviceTimeline() = default;
  virtual void hold() = 0;
  virtual void release() = 0;
  virtual void mark() = 0;
  // Waits for the device; the seconds from the first mark to each mark (the first is 0).
  virtual std::vector<double> read() = 0;
  virtual bool expired() const = 0;
  // Forgets the marks read (after read()), keeping their events for the next ones: a timeline
  // kept across many steps creates no event per mark.
  virtual void restart() = 0;
};

// The arithmetic of CUDA's float32 products (--math), process-wide: strict float32 (the
// default); TF32 tensor cores (inputs rounded to 10 mantissa bits, float32 accumulation); or
// bf16 tensor cores for cuBLAS and cuBLASLt's products (inputs rounded to bf16's 7 mantissa
// bits, to nearest even; float32 accumulation and storage) with TF32 for cuDNN's
// convolutions, which have no bf16 mode for float32 tensors. The CPU computes in float32.
enum class CudaMath : int { Fp32 = 0, Tf32 = 1, Bf16 = 2 };
inline const char* cuda_math_name(CudaMath m) {
  return m == CudaMath::Bf16 ? "bf16" : m == CudaMath::Tf32 ? "tf32" : "fp32";
}

// Whether CUDA can be used here and, if not, why (devices/registry.h's cuda_status(); the
// CUDA backend's probe fills it in).
struct CudaStatus {
  bool usable = false;
  int device_count = 0;
  std::string reason;  // why not usable: built without CUDA, no driver, no GPU, ...
};

// A backend is its device's memory too (core/device_memory.h): the allocator and the copy,
// fill and cast below are what core's Tensor calls, through the provider the registry
// installs.
class Backend : public DeviceMemory {
 public:
  explicit Backend(Device device) : device_(device) {}
  ~Backend() override = default;
  Device device() const { return device_; }
  virtual std::string name() const = 0;
  // Why bf16 tensors (--precision bf16) cannot run here, or "" when they can. The CPU always
  // can (it computes each op in float32 between bf16 loads and stores); CUDA needs bf16 tensor
  // cores, compute capability 8.0 or later.
  virtual std::string bf16_obstacle() const { return {}; }
  // Waits for queued work (a no-op on the CPU). Only the host's read-backs need it.
  virtual void synchronize() {}
  // Runs `work` while recording everything it queues on this device into a graph, instead of
  // running it; nothing of it runs until replay(). Memory the work allocates comes from a pool
  // the graph keeps. Throws (and discards the recording) when the work does what a graph
  // cannot hold: a read-back to the host, a synchronisation, a host-to-device copy from
  // memory the host may change. Devices without graphs (the CPU) throw.
  virtual std::unique_ptr<StepGraph> capture(const std::function<void()>& work);
  // The counts since the process started, where the device keeps them: the CUDA simulator
  // does (devices/cuda/sim/sim.h); a GPU and the CPU do not (false).
  virtual bool device_counts(DeviceCounts*) const { return false; }
  // A timeline of the device's own time, where the device runs work apart from the host
  // (CUDA); nullptr on the CPU, whose kernels have finished when their calls return.
  virtual std::unique_ptr<DeviceTimeline> timeline() { return nullptr; }

  // ---- memory: copy, fill, cast --------------------------------------------------------
  void copy_from_host(Tensor& dst, const void* src) override;
  void copy_to_host(const Tensor& src, void* dst) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& t, double value) override;
  void cast(const Tensor& src, Tensor& dst) override;  // same shape, other dtype
  // dst[i] = src[i] cast, for every i: a model's weights to their bf16 copies in one call where
  // the device can (CUDA: one kernel for up to 32 tensors); the default casts them one by one.
  virtual void cast_all(const std::vector<Tensor>& src, std::vector<Tensor>& dst);
  // rows: (n, d...)  index: int32 (b)  out: (b, d...)   out[i] = rows[index[i]]
  virtual void gather_rows(const Tensor& rows, const Tensor& index, Tensor& out);
  // The loader's batch, built from a data set held on the device as it was stored, with the
  // host loader's arithmetic (core/pixels.h), so its batches are the host's bit for bit:
  // rows: uint8 (n, c, h, w) standing for p / 255, or float32 (n, c, h, w) in [0, 1]
  // index: int32 (b)   shifts: int32 (b, 3) = {dy, dx, flip}, or undefined (no crop or flip)
  // mean_std: float32 (2, c) = {mean; std}, or undefined (no normalisation)
  // out: float32 (b, c, h, w)
  //   out[i, ch, y, x] = (v − mean[ch]) / std[ch],  v = unit(rows[index[i], ch, y + dy, x' + dx]),
  //   x' = flip ? w − 1 − x : x, and v = 0 where that falls outside the image (zero padding)
  virtual void gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts, const Tensor& mean_std,
                             Tensor& out);
  // The same two with the batch's place in the epoch read on the device (a CUDA graph's replay
  // gathers its own step's batch): order: int32 (n)  position: int32 scalar  out: (b, ...)
  //   out[i] = rows[order[position·b + i]]  (shifts indexed likewise; the caller advances
  //   position, increment_counter). order[position·b + b − 1] must exist.
  virtual void gather_rows_at(const Tensor& rows, const Tensor& order, const Tensor& position, Tensor& out);
  virtual void gather_images_at(const Tensor& rows, const Tensor& order, const Tensor& shifts, const Tensor& position,
                                const Tensor& mean_std, Tensor& out);
  // counter: int32 scalar   counter += 1, on the device: no read-back, and a CUDA graph's
  // replay counts every step, where a value filled in from the host would be frozen
  // (BatchNorm's num_batches_tracked, Dropout's count of the masks drawn).
  virtual void increment_counter(Tensor& counter);

  // ---- gemm ----------------------------------------------------------------------------
  // C(m×n) = alpha · op(A) · op(B) + beta · C, row-major; op(A) is m×k, op(B) is k×n.
  // A is stored m×k (k×m when trans_a), B is stored k×n (n×k when trans_b).
  // A, B and C of one dtype (float32; float64 on the CPU), or A and B bf16 with C bf16 or
  // float32: the products exact, the sums in float32, a bf16 C rounded once as it is stored
  // (check_gemm_dtypes).
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a,
                    const Tensor& b, double beta, Tensor& c);
  // A Linear layer's forward: y (n, out) = x (n, in) · wᵀ (w: (out, in)) + b (out, or null),
  // then, when relu, y = max(0, y) (a ReLU epilogue: linear in autograd/ops.h).
  // The default is gemm, bias_forward and unary_forward in place; the CPU adds the bias and
  // takes the max inside its product where it can, CUDA in a cuBLASLt epilogue.
  virtual void linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu);
  // A Linear layer's whole backward (LinearBackward, autograd/ops/matmul.cpp). relu_output is
  // the ReLU epilogue's y, or null without one:
  //   dz = dy·[y > 0] (ReLU) or dy     db (out) = Σ_rows dz
  //   dx (n, in) = dz (n, out) · w (out, in)      dw (out, in) = dzᵀ · x (n, in)
  // each of dx, dw, db computed only when non-null. The default is relu_bias_backward (or
  // bias_backward) and then linear_products; CUDA takes db inside dw's product (a cuBLASLt
  // bias-gradient epilogue) where the library has an algorithm for it.
  virtual void linear_backward(const Tensor& dy, const Tensor* relu_output, const Tensor& x, const Tensor& w,
                               Tensor* dx, Tensor* dw, Tensor* db);
  // The two products alone, either output may be null. The default is two gemm calls; the CPU
  // on two threads runs the two at once, one per thread, in one parallel region (each product
  // with the bits gemm gives it on one thread).
  virtual void linear_products(const Tensor& dz, const Tensor& x, const Tensor& w, Tensor* dx, Tensor* dw);

  // ---- elementwise ---------------------------------------------------------------------
  // Broadcasting by suffix: y has n elements; a and b have n or a divisor of n elements
  // whose shape is a suffix of y's, so element i reads a[i % na] and b[i % nb].
  virtual void binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);
  // da (na elements) and db (nb elements) receive dy summed over the broadcast rows; either
  // may be undefined when not needed.
  virtual void binary_backward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da,
                               Tensor* db);
  virtual void unary_forward(UnaryOp op, const Tensor& x, Tensor& y);
  // Uses y (the forward output) where the derivative is cheaper from it (sigmoid, tanh).
  virtual void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);
  // y = alpha · x + beta · y   (beta = 0 overwrites y, NaNs included)
  virtual void axpby(double alpha, const Tensor& x, double beta, Tensor& y);

  // ---- bias and reductions -------------------------------------------------------------
  // y: (outer, c, inner)  b: (c)        y[o, j, i] += b[j]
  virtual void bias_forward(Tensor& y, const Tensor& b, int64_t inner);
  // dy: (outer, c, inner)  db: (c)      db[j] = Σ_o Σ_i dy[o, j, i]
  virtual void bias_backward(const Tensor& dy, Tensor& db, int64_t inner);
  // A ReLU's backward and the bias gradient of the layer under it, y = relu(layer(x) + b):
  // y, dy, dz: (outer, c, inner)  db: (c), or null for a layer without a bias
  //   dz = dy·[y > 0]   (y > 0 exactly where the ReLU's input was)
  //   db[j] = Σ_o Σ_i dz[o, j, i], summed as bias_backward sums, so the fused pair gives the
  //   same bits as the two kernels one after the other (the default).
  virtual void relu_bias_backward(const Tensor& y, const Tensor& dy, Tensor& dz, Tensor* db, int64_t inner);
  // out: scalar   out = Σ x   (scale applied after: out = scale · Σ x)
  virtual void sum_all(const Tensor& x, double scale, Tensor& out);
  // out: scalar float32/64   out = Σ x²   (for gradient-norm clipping)
  virtual void sum_squares(const Tensor& x, Tensor& out);

  // ---- softmax and cross-entropy -------------------------------------------------------
  // x: (n, c)  y: (n, c)   y = x − max − log Σ exp(x − max)  per row
  virtual void log_softmax_forward(const Tensor& x, Tensor& y);
  // dx = dy − softmax(x) · Σ_row dy   (softmax recovered as exp(y))
  virtual void log_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
  // logits: (n, c)  labels: int32 (n)  probs: (n, c)  loss: scalar
  // loss = −(1/n) Σ log softmax(logits)[label];  probs kept for the backward pass.
  // When the loss is not finite, raises nonfinite_flag (core/nonfinite.h; may be null or
  // undefined) with `mark`, unless it is raised already.
  virtual void softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs, Tensor& loss,
                                    Tensor* nonfinite_flag, NonFiniteMark mark);
  // dlogits = dloss · (probs − onehot(labels)) / n
  virtual void softmax_xent_backward(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                                     Tensor& dlogits);
  // correct: int32 scalar   correct += #{ i : argmax(logits[i]) == labels[i] }
  virtual void count_correct(const Tensor& logits, const Tensor& labels, Tensor& correct);
  // flag: the non-finite flag, int32 (2) (core/nonfinite.h)
  // flag = {mark.step, mark.source} if flag[0] == 0 and any element of x is NaN or ±inf
  virtual void check_finite(const Tensor& x, Tensor& flag, NonFiniteMark mark);
  // check_finite over a list: flag = marks[i] for the first i (in list order) whose tensor has a
  // NaN or ±inf. The default checks one tensor after another; the CPU checks all in one pass
  // over its threads (a small model's step has several such tensors, each a parallel region).
  // step_number (may be null): int32 scalar on the device whose value replaces the marks' step,
  // read as the check runs (a CUDA graph's replay names its own step).
  virtual void check_finite_all(const std::vector<Tensor>& xs, Tensor& flag, const std::vector<NonFiniteMark>& marks,
                                const Tensor* step_number);

  // ---- optimizer steps (fused, in place) -----------------------------------------------
  // Skipped entirely when skip_flag (the non-finite flag, may be undefined) is raised:
  // skip_flag[0] != 0.
  // PyTorch's SGD:  g = grad + wd·p;  buf = first ? g : m·buf + (1−dampening)·g;
  //                 g = nesterov ? g + m·buf : buf;  p −= lr·g
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdParams& hp,
                        bool first_step, const Tensor* skip_flag);
  // sgd_step on every parameter of a step. Slots with check_grad have their gradient checked
  // first, as check_finite_all would: the first of them (in list order) holding a NaN or ±inf
  // raises skip_flag with its grad_mark, and then no parameter is updated. The default checks,
  // then steps one parameter after another; the CPU does all in one parallel region, each
  // thread updating the share of a gradient it has just checked, still in its cache.
  virtual void sgd_step_all(const std::vector<SgdSlot>& slots, const SgdParams& hp, Tensor* skip_flag);
  // PyTorch's Adam/AdamW at step t (1-based):  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;
  //   p −= lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + eps)
  virtual void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         const AdamParams& hp, int64_t step, const Tensor* skip_flag);
  // adam_step on every parameter of a step. The default steps one parameter after another;
  // CUDA updates up to 32 parameters per launch.
  virtual void adam_step_all(const std::vector<AdamSlot>& slots, const AdamParams& hp, const Tensor* skip_flag);

  // ---- convolution (conv2d_cpu.cpp / conv2d_cuda.cu) -----------------------------------
  // One op (autograd/ops.h's conv2d): z = W ⋆ x + b, then its epilogue e: y = z, y = max(0, z),
  // or y = the max-pool of max(0, z) with its winners in argmax. Where the device fuses the
  // epilogue, z is never stored.
  //   x: (n, c, h, w)  w: (k, c, r, s)  b: (k) or null  y: (n, k, p, q), or the pool's output
  //   argmax: int32, y's shape, for the pool (else null)
  // The default is the convolution (convolve), then the epilogue's own kernels.
  virtual void conv2d_forward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& x, const Tensor& w,
                              const Tensor* b, Tensor& y, Tensor* argmax);
  // Its backward. dy: y's gradient; saved: what the epilogue's backward reads (y for the ReLU,
  // argmax for the pool, undefined for none). dz = the epilogue's backward of dy, then
  //   dx = col2im(Wᵀ · dz)     dw = Σ_n dz · im2col(x)ᵀ     db = Σ_{n,p,q} dz
  // each only where defined on entry (an undefined one needs no gradient). The default stores
  // dz and runs the pieces below; the CPU makes dz plane by plane where its kernels can.
  virtual void conv2d_backward(const Conv2dGeometry& g, const ConvEpilogue& e, const Tensor& dy,
                               const Tensor& saved, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                               Tensor& db);

 protected:
  // The pieces every device implements, which the two above compose:
  //   z = W ⋆ x + b;   dx = col2im(Wᵀ · dz);   dw = Σ_n dz · im2col(x)ᵀ and, with db, db = Σ dz
  //   (the CPU sums the bias from the planes of dz its filter gradient reads anyway).
  virtual void convolve(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& z);
  virtual void convolve_backward_data(const Conv2dGeometry& g, const Tensor& dz, const Tensor& w, Tensor& dx);
  virtual void convolve_backward_filter(const Conv2dGeometry& g, const Tensor& dz, const Tensor& x, Tensor& dw,
                                        Tensor* db);

 public:
  // ---- pooling (pool2d_cpu.cpp / pool2d_cuda.cu) ---------------------------------------
  // x: (n, c, h, w)  y: (n, c, p, q)  argmax: int32 (n, c, p, q), flat index into the h×w plane
  // (−1: no winner, a window the fused ReLU zeroed, see Pool2dGeometry::relu)
  virtual void maxpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y, Tensor& argmax);
  virtual void maxpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& argmax, Tensor& dx);
  // Average over the window including padding (PyTorch's count_include_pad=True).
  virtual void avgpool2d_forward(const Pool2dGeometry& g, const Tensor& x, Tensor& y);
  virtual void avgpool2d_backward(const Pool2dGeometry& g, const Tensor& dy, Tensor& dx);

  // ---- batch normalisation (batchnorm_cpu.cpp / batchnorm_cuda.cu) ---------------------
  // x, y: (n, c, h, w)  gamma, beta, running_*, save_*: (c)
  // Training: normalise with batch statistics, save mean and 1/√(var+eps), and update
  // running_mean/var with momentum (unbiased variance, as PyTorch).
  virtual void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                                       Tensor& y, Tensor& save_mean, Tensor& save_invstd);
  virtual void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& running_mean, const Tensor& running_var, double eps, Tensor& y);
  virtual void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                  const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

  // ---- dropout (dropout_cpu.cpp / dropout_cuda.cu) -------------------------------------
  // Element i is kept iff philox_u32(seed, Dropout, stream, i) ≥ threshold, with threshold
  // = ⌊p·2³²⌋ compared as integers, so masks are bit-equal on every device. With a step
  // count (int32 scalar on x's device, read there: a CUDA graph's replay reads the count of
  // its own step), the stream is stream + (step_count mod 2²⁴) (layers/dropout.h).
  // x, y: any shape   mask: uint8, same numel   y = x · mask / (1 − p)
  virtual void dropout_forward(const Tensor& x, double p, uint64_t seed, uint32_t stream, const Tensor* step_count,
                               Tensor& y, Tensor& mask);
  virtual void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx);

 protected:
  [[noreturn]] void missing(const char* kernel) const;
  // sgd_step_all's first part, on every device alike: the gradients of the slots with
  // check_grad in one check_finite_all, raising skip_flag (required then) with their marks.
  void check_slot_gradients(const std::vector<SgdSlot>& slots, Tensor* skip_flag);
  // The counters kernels read on the device (a step count, a step number, a batch position,
  // increment_counter's counter): one int32 on `device`, else an Error naming op and what.
  static void check_device_counter(const char* op, const char* what, const Tensor& counter, const Device& device);
  // gather_*_at's order and position: int32 on out's device, the position one value.
  static void check_gather_position(const Tensor& order, const Tensor& position, const Tensor& out);
  // gather_images(_at)'s operands, as that comment says, with `index` b entries (or, with
  // `at`, an order of any length whose shifts are as long).
  static void check_gather_images(const Tensor& rows, const Tensor& index, const Tensor& shifts,
                                  const Tensor& mean_std, const Tensor& out, bool at);

 private:
  Device device_;
};

}  // namespace nnlab
