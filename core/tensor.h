// Tensor: a handle to shape + dtype + device + storage, plus the autograd fields (grad,
// grad_fn). Copies of a Tensor share one TensorImpl, so a module, its optimizer and the
// graph all see the same parameter. Storage is row-major and contiguous; a tensor may start
// at an offset into its storage (row slices of a resident data set, reshapes).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace nnlab {

class Node;

// A block of device memory, returned to its device's caching allocator when the last
// tensor using it goes away.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device;
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset_bytes = 0;
  Shape shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;              // true for leaves that want .grad
  std::shared_ptr<TensorImpl> grad;        // accumulated by the engine
  std::shared_ptr<Node> grad_fn;           // the node that made this tensor, if any
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories. Contents of empty() are unspecified.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32,
                     Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t ndim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  std::string describe() const;  // "float32[64, 10] on cpu"

  void* raw_data() const { return static_cast<char*>(impl().storage->data) + impl().offset_bytes; }
  template <typename T>
  T* data() const {
    NNLAB_CHECK(DTypeOf<T>::value == dtype(), "tensor of ", dtype_name(dtype()), " read as ",
                dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }

  // Copies (never views): to another device or dtype; clone() on the same device.
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor clone() const;
  // Host copy of the values, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  double item() const;  // the single value (synchronises with the device)

  // Views sharing storage, without autograd history.
  Tensor detach() const;
  Tensor view(const Shape& shape) const;     // same numel
  Tensor rows(int64_t begin, int64_t end) const;  // slice of the outermost dimension

  // In place, on the tensor's own device.
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);          // same shape; any devices
  // Moves the storage to another device/dtype, keeping this handle (and its sharers) valid.
  void move_to_(Device device);
  void convert_to_(DType dtype);

  // Autograd.
  bool requires_grad() const { return impl().requires_grad || impl().grad_fn != nullptr; }
  Tensor& set_requires_grad(bool on);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  void set_grad_fn(std::shared_ptr<Node> fn) { impl().grad_fn = std::move(fn); }
  // Defined in autograd/engine.cpp: the engine sits a floor above core (docs/design.md, Floors),
  // so a program that calls backward() links the autograd library.
  void backward() const;
  void backward(const Tensor& seed) const;

  bool same_storage(const Tensor& o) const { return impl().storage == o.impl().storage; }
  long storage_use_count() const { return impl().storage.use_count(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  TensorImpl& impl() const {
    NNLAB_CHECK(impl_, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Throws unless all tensors are on one device: "<op>: inputs on cpu and cuda:0 ...".
void check_same_device(const char* op, const std::vector<const Tensor*>& tensors);
void check_dtype(const char* op, const Tensor& t, DType expected);
void check_float(const char* op, const Tensor& t);

}  // namespace nnlab
