// libFuzzer target: the safetensors (checkpoint) reader (core/serialization.h). Every tensor
// it returns must hold exactly the bytes its shape and dtype call for.
#include "core/serialization.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nnlab_fuzz::scratch_dir() + "/input.safetensors";
  nnlab_fuzz::write_file(path, data, size);
  nnlab_fuzz::expect_value_or_error([&] {
    const nnlab::SafetensorsFile f = nnlab::load_safetensors(path);
    for (const auto& [name, t] : f.tensors)
      if (name.empty() || t.numel() < 0) std::abort();
  });
  return 0;
}
