// libFuzzer target: the .tar.gz reader that `nnlab data fetch` opens npm tarballs and the
// original CIFAR-10 archive with (datasets/tar_gz.h). Every member it returns must hold
// exactly the size its header claimed, within the limit asked for.
#include "datasets/tar_gz.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nnlab_fuzz::scratch_dir() + "/input.tgz";
  nnlab_fuzz::write_file(path, data, size);
  nnlab_fuzz::expect_value_or_error([&] {
    nnlab::TarGzReader tar(path);
    nnlab::TarEntry entry;
    while (tar.next(entry))
      if (static_cast<int64_t>(tar.read(int64_t{1} << 20).size()) != entry.size) std::abort();
  });
  return 0;
}
