#include "core/tensor.h"

#include <cstring>

#include "core/device_memory.h"

namespace nnlab {

Storage::Storage(size_t nbytes, Device dev) : bytes(nbytes), device(dev) {
  data = device_memory(dev).allocator().allocate(nbytes == 0 ? 1 : nbytes);
}

Storage::~Storage() { device_memory(device).allocator().deallocate(data); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    NNLAB_CHECK(d >= 0, "tensor shape ", shape_str(shape), " has a negative extent");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  NNLAB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
              " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, DTypeOf<T>::value, device);
  device_memory(device).copy_from_host(t, values.data());
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor Tensor::from_vector(const std::vector<BFloat16>&, const Shape&, Device);

int64_t Tensor::dim(int i) const {
  const int n = static_cast<int>(ndim());
  const int j = i < 0 ? i + n : i;
  NNLAB_CHECK(j >= 0 && j < n, "dimension ", i, " out of range for shape ", shape_str(shape()));
  return shape()[j];
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype())) + shape_str(shape()) + " on " + device().str();
}

Tensor Tensor::to(Device dev) const {
  Tensor out = empty(shape(), dtype(), dev);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType t) const {
  Tensor out = empty(shape(), t, device());
  device_memory(device()).cast(*this, out);
  return out;
}

Tensor Tensor::clone() const { return to(device()); }

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  if (host.dtype() != DTypeOf<T>::value) host = host.to(DTypeOf<T>::value);
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;
template std::vector<BFloat16> Tensor::to_vector() const;

double Tensor::item() const {
  NNLAB_CHECK(numel() == 1, "item() needs a tensor of one element, got ", describe());
  return to_vector<double>()[0];
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset_bytes = impl_->offset_bytes;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::view(const Shape& new_shape) const {
  NNLAB_CHECK(shape_numel(new_shape) == numel(), "cannot view ", describe(), " as shape ", shape_str(new_shape),
              ": element counts differ");
  Tensor t = detach();
  t.impl_->shape = new_shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  NNLAB_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= dim(0), "rows(", begin, ", ", end,
              ") out of range for ", describe());
  Tensor t = detach();
  const int64_t row_elems = dim(0) == 0 ? 0 : numel() / dim(0);
  t.impl_->offset_bytes += static_cast<size_t>(begin * row_elems) * dtype_size(dtype());
  t.impl_->shape[0] = end - begin;
  return t;
}

Tensor& Tensor::fill_(double value) {
  device_memory(device()).fill(*this, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  NNLAB_CHECK(src.shape() == shape() && src.dtype() == dtype(), "copy_: source ", src.describe(),
              " does not match destination ", describe());
  if (src.device().is_cpu() && device().is_cpu()) {
    if (nbytes()) std::memcpy(raw_data(), src.raw_data(), nbytes());
  } else if (src.device().is_cpu()) {
    device_memory(device()).copy_from_host(*this, src.raw_data());
  } else if (device().is_cpu()) {
    device_memory(src.device()).copy_to_host(src, raw_data());
  } else {
    NNLAB_CHECK(src.device() == device(), "copy_ between ", src.device().str(), " and ", device().str(),
                " is not supported; copy through the host");
    device_memory(device()).copy(src, *this);
  }
  return *this;
}

void Tensor::move_to_(Device dev) {
  if (dev == device()) return;
  Tensor moved = to(dev);
  impl_->storage = moved.impl_->storage;
  impl_->offset_bytes = moved.impl_->offset_bytes;
  if (impl_->grad) Tensor(impl_->grad).move_to_(dev);
}

void Tensor::convert_to_(DType t) {
  if (t == dtype()) return;
  Tensor converted = to(t);
  impl_->storage = converted.impl_->storage;
  impl_->offset_bytes = 0;
  impl_->dtype = t;
  impl_->grad.reset();
}

Tensor& Tensor::set_requires_grad(bool on) {
  NNLAB_CHECK(!on || dtype() == DType::Float32 || dtype() == DType::Float64 || dtype() == DType::BFloat16,
              "only floating-point tensors can require gradients, not ", describe());
  impl().requires_grad = on;
  return *this;
}

void check_same_device(const char* op, const std::vector<const Tensor*>& tensors) {
  for (const Tensor* t : tensors)
    NNLAB_CHECK(t->device() == tensors.front()->device(), op, ": inputs are on ", tensors.front()->device().str(),
                " and ", t->device().str(), "; move them to one device with .to(device)");
}

void check_dtype(const char* op, const Tensor& t, DType expected) {
  NNLAB_CHECK(t.dtype() == expected, op, ": expected ", dtype_name(expected), ", got ", t.describe());
}

void check_float(const char* op, const Tensor& t) {
  NNLAB_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64 || t.dtype() == DType::BFloat16, op,
              ": expected a float32, float64 or bfloat16 tensor, got ", t.describe());
}

}  // namespace nnlab
