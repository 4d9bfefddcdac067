// libFuzzer target: the model-file reader and checker (layers/model_file.h), as `nnlab train
// --model-file` runs them for an MNIST-shaped and a CIFAR-shaped input. A file may be refused
// with an nnlab::Error; it must never crash, hang or exhaust the stack (deep nesting, huge
// layer counts and sizes are bounded before anything is built).
#include "fuzz_common.h"
#include "layers/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nnlab_fuzz::expect_value_or_error([&] {
    const nnlab::ModelFile file = nnlab::parse_model_file(text, "fuzz input", "fuzz");
    nnlab::check_model(file, nnlab::InputSpec{1, 28, 28, 10});
    nnlab::check_model(file, nnlab::InputSpec{3, 32, 32, 10});
  });
  return 0;
}
