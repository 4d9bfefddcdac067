// Replays the fuzzing seeds and every input a fuzzer ever crashed on (tests/fuzz/corpus/
// <target>/ and tests/fuzz/regressions/<target>/) through the real readers: each must load
// or be refused with an nnlab::Error, never crash or throw anything else. Under
// scripts/sanitize.sh this also checks them for memory errors and undefined behaviour.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/serialization.h"
#include "datasets/cifar10.h"
#include "datasets/idx.h"
#include "datasets/image_io.h"
#include "datasets/tar_gz.h"
#include "layers/model_file.h"

namespace fs = std::filesystem;
using namespace nnlab;

namespace {

// Every file of the target's seed and regression folders, in name order.
std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(NNLAB_TEST_DIR) / "fuzz" / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Runs `read` on each input; counts those that loaded. Any exception but nnlab::Error fails.
int replay(const std::string& target, const std::function<void(const fs::path&)>& read) {
  const std::vector<fs::path> files = inputs_of(target);
  REQUIRE_FALSE(files.empty());
  int loaded = 0;
  for (const fs::path& f : files) {
    INFO(f.string());
    try {
      read(f);
      ++loaded;
    } catch (const Error&) {
    }
  }
  return loaded;
}

}  // namespace

TEST_CASE("fuzz corpora: every seed and past crash input loads or is refused cleanly", "[fuzz]") {
  // The seeds are valid files, so each reader must load at least one of them.
  CHECK(replay("idx", [](const fs::path& f) { read_idx_file(f.string()); }) > 0);
  CHECK(replay("image", [](const fs::path& f) {
          const Image im = read_image(f.string());
          image_to_tensor(im, 1, 28, 28);
          image_to_tensor(im, 3, 32, 32);
        }) > 0);
  CHECK(replay("safetensors", [](const fs::path& f) { load_safetensors(f.string()); }) > 0);
  CHECK(replay("model_file", [](const fs::path& f) {
          const ModelFile m = read_model_file(f.string());
          check_model(m, InputSpec{1, 28, 28, 10});
          check_model(m, InputSpec{3, 32, 32, 10});
        }) > 0);
  CHECK(replay("tar_gz", [](const fs::path& f) {
          TarGzReader tar(f.string());
          TarEntry e;
          while (tar.next(e)) REQUIRE(static_cast<int64_t>(tar.read(1 << 20).size()) == e.size);
        }) > 0);
  // The CIFAR reader takes a folder: each input becomes its test_batch.bin.
  const fs::path dir = fs::temp_directory_path() / ("nnlab_fuzz_replay_" + std::to_string(getpid()));
  fs::create_directories(dir);
  CHECK(replay("cifar", [&](const fs::path& f) {
          fs::copy_file(f, dir / "test_batch.bin", fs::copy_options::overwrite_existing);
          load_cifar10(dir.string(), "test");
        }) > 0);
  fs::remove_all(dir);
}

TEST_CASE("fuzz regressions: JPEG, PNG and BMP files that crashed, exhausted or fooled stb_image 2.27 are refused first", "[fuzz]") {
  const fs::path dir = fs::path(NNLAB_TEST_DIR) / "fuzz" / "regressions" / "image";
  // Found by fuzz_image: the scan names AC table 2, never defined (stb read uninitialised
  // memory and crashed with a wild index).
  const std::string undefined = (dir / "jpeg-scan-uses-undefined-huffman-table.jpg").string();
  CHECK_THROWS_WITH(read_image(undefined), Catch::Contains(undefined) && Catch::Contains("corrupt JPEG") &&
                                               Catch::Contains("AC Huffman table 2, which the file does not define"));
  CHECK_THROWS_WITH(read_image_info(undefined), Catch::Contains("corrupt JPEG"));
  // A table declaring 262 codes (stb overran its 256-entry arrays).
  const std::string over = (dir / "jpeg-huffman-table-over-256-codes.jpg").string();
  CHECK_THROWS_WITH(read_image(over), Catch::Contains("a Huffman table declares 262 codes (at most 256)"));
  // Found by fuzz_image (UBSan): a file that ends inside its Huffman table segment; stb
  // read zeros past the end and overran the table while reading the header.
  const std::string cut = (dir / "jpeg-cut-inside-huffman-table.jpg").string();
  CHECK_THROWS_WITH(read_image_info(cut), Catch::Contains("the file ends inside a Huffman table or scan header"));
  // Found by fuzz_image (UBSan): the same table overrun in a file starting 0xFF 0xFF 0xD8,
  // which stb takes for a JPEG (fill bytes before the start marker).
  const std::string fill = (dir / "jpeg-fill-bytes-before-soi-and-over-256-codes.jpg").string();
  CHECK_THROWS_WITH(read_image_info(fill), Catch::Contains("corrupt JPEG"));
  // Found by fuzz_image (out of memory): an IDAT chunk claiming ~2 GiB in a 200-byte file;
  // stb allocated the claim before looking for the bytes.
  const std::string png = (fs::path(NNLAB_TEST_DIR) / "fuzz" / "regressions" / "image" / "png-idat-claims-2gib.png").string();
  CHECK_THROWS_WITH(read_image(png), Catch::Contains("corrupt PNG: chunk") && Catch::Contains("(truncated or corrupt)"));
  // Found by fuzz_image (timeout): a 129-byte BMP claiming 2048×1629 pixels, which stb
  // "decoded" by filling the missing rows with zeros.
  const std::string bmp = (dir / "bmp-129-bytes-claiming-2048x1629.bmp").string();
  CHECK_THROWS_WITH(read_image(bmp), Catch::Contains("corrupt BMP: its header claims 2048x1629 pixels at 24 bits") &&
                                         Catch::Contains("but the file has 129 bytes (truncated)"));
  // Found by fuzz_image (timeout): a 47-byte BMP with compression 0xda000000, which stb reads
  // as a negative int and lets through, claiming 3842×12036 pixels.
  const std::string bmp_compression = (dir / "bmp-47-bytes-negative-compression.bmp").string();
  CHECK_THROWS_WITH(read_image(bmp_compression),
                    Catch::Contains("corrupt BMP: compression type 3657433088 is not supported"));
  // Found by fuzz_image (UBSan): a PNG whose first IDAT chunk is empty; stb_image 2.27
  // memcpy'd it into its still null buffer.
  const std::string empty_idat = (dir / "png-empty-idat-before-data.png").string();
  CHECK_THROWS_WITH(read_image(empty_idat), Catch::Contains("corrupt PNG: an empty IDAT chunk comes before any image data"));
  // Found by fuzz_image (timeout): a 698-byte JPEG claiming 11272×4102 pixels, which stb
  // "decoded" by filling the missing blocks.
  const std::string jpeg_short = (dir / "jpeg-698-bytes-claiming-11272x4102.jpg").string();
  CHECK_THROWS_WITH(read_image(jpeg_short),
                    Catch::Contains("corrupt JPEG: its header claims 11272x4102 pixels, which take at least 90352 bytes") &&
                        Catch::Contains("but the file has 698 bytes (truncated)"));
  // The valid seeds still decode.
  for (const char* seed : {"rgb-8x6.jpg", "gray-5x4.jpg", "rgb-8x6.bmp", "gray-5x4.bmp", "rgba-4x4.png"}) {
    const Image im = read_image((fs::path(NNLAB_TEST_DIR) / "fuzz" / "corpus" / "image" / seed).string());
    CHECK(im.width > 0);
  }
}
