// libFuzzer target: the IDX reader (datasets/idx.h), raw and gzip alike (zlib sniffs the
// format). A header may claim anything; the reader must refuse it without a huge allocation.
#include "datasets/idx.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nnlab_fuzz::scratch_dir() + "/input-idx3-ubyte";
  nnlab_fuzz::write_file(path, data, size);
  nnlab_fuzz::expect_value_or_error([&] {
    const nnlab::IdxArray a = nnlab::read_idx_file(path);
    int64_t n = 1;
    for (int64_t d : a.dims) n *= d;
    if (n != static_cast<int64_t>(a.data.size())) std::abort();  // header and payload disagree
  });
  return 0;
}
