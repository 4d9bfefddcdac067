// Image loading (stb_image), conversion to a model's input, image-folder data sets and the
// progress lines of `nnlab train`.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "apps/progress.h"
#include "core/error.h"
#include "datasets/dataset.h"
#include "datasets/image_folder.h"
#include "datasets/image_io.h"

#include <stb_image_write.h>  // its implementation: stb_image_write_impl.cpp

using namespace nnlab;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("nnlab_image_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// w×h image with c channels, pixel value f(x, y, channel).
template <typename F>
std::vector<uint8_t> pixels(int w, int h, int c, F f) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * c));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch) px[(y * w + x) * c + ch] = static_cast<uint8_t>(f(x, y, ch));
  return px;
}

void write_png(const fs::path& p, int w, int h, int c, const std::vector<uint8_t>& px) {
  REQUIRE(stbi_write_png(p.c_str(), w, h, c, px.data(), w * c) != 0);
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("PNG, JPEG and BMP files load with their size, channels and pixels", "[image]") {
  const fs::path dir = temp_dir("formats");
  const auto gray = pixels(5, 3, 1, [](int x, int y, int) { return 40 * y + 7 * x; });
  write_png(dir / "g.png", 5, 3, 1, gray);
  Image img = read_image((dir / "g.png").string());
  CHECK(img.width == 5);
  CHECK(img.height == 3);
  CHECK(img.channels == 1);
  CHECK(img.pixels == gray);

  const auto rgb = pixels(4, 2, 3, [](int x, int y, int c) { return 60 * c + 20 * x + 5 * y; });
  REQUIRE(stbi_write_bmp((dir / "c.bmp").c_str(), 4, 2, 3, rgb.data()) != 0);
  img = read_image((dir / "c.bmp").string());
  CHECK(img.channels == 3);
  CHECK(img.pixels == rgb);

  // RGBA: the alpha channel is dropped, the colour kept.
  const auto rgba = pixels(2, 2, 4, [](int x, int, int c) { return c == 3 ? 0 : 100 + 50 * c + x; });
  write_png(dir / "a.png", 2, 2, 4, rgba);
  img = read_image((dir / "a.png").string());
  CHECK(img.channels == 3);
  CHECK(img.pixels == std::vector<uint8_t>{100, 150, 200, 101, 151, 201, 100, 150, 200, 101, 151, 201});

  // JPEG is lossy: a flat colour comes back within a few levels.
  const auto flat = pixels(16, 16, 3, [](int, int, int c) { return 50 + 80 * c; });
  REQUIRE(stbi_write_jpg((dir / "f.jpg").c_str(), 16, 16, 3, flat.data(), 100) != 0);
  img = read_image((dir / "f.jpg").string());
  REQUIRE(img.channels == 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) CHECK(std::abs(int(img.pixels[i]) - int(flat[i])) <= 3);
  fs::remove_all(dir);
}

TEST_CASE("channel conversion: BT.601 luminance for RGB to gray, replication for gray to RGB", "[image]") {
  Image rgb{2, 1, 3, {255, 0, 0, 10, 20, 30}};
  Tensor g = image_to_tensor(rgb, 1, 1, 2);
  CHECK(g.data<float>()[0] == Approx(0.299).epsilon(1e-6));
  CHECK(g.data<float>()[1] == Approx((0.299 * 10 + 0.587 * 20 + 0.114 * 30) / 255).epsilon(1e-6));

  Image gray{2, 1, 1, {51, 255}};
  Tensor c = image_to_tensor(gray, 3, 1, 2);
  for (int ch = 0; ch < 3; ++ch) {
    CHECK(c.data<float>()[ch * 2 + 0] == Approx(0.2f));
    CHECK(c.data<float>()[ch * 2 + 1] == 1.0f);
  }
  CHECK_THROWS_WITH(image_to_tensor(gray, 2, 1, 2), Catch::Contains("1 (gray) or 3 (RGB)"));
}

TEST_CASE("bilinear resize uses half-pixel centres (PyTorch align_corners=False)", "[image]") {
  // Up: 2 → 4 samples at s = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
  const float row[2] = {0.0f, 1.0f};
  float up[4];
  resize_bilinear(row, 1, 2, up, 1, 4);
  CHECK(up[0] == 0.0f);
  CHECK(up[1] == Approx(0.25f));
  CHECK(up[2] == Approx(0.75f));
  CHECK(up[3] == 1.0f);
  // Down: 4 → 2 samples at s = 0.5 and 2.5, the means of the pairs.
  const float four[4] = {0, 1, 2, 3};
  float down[2];
  resize_bilinear(four, 1, 4, down, 1, 2);
  CHECK(down[0] == Approx(0.5f));
  CHECK(down[1] == Approx(2.5f));
  // 2-D: the centre of a 2×2 → 3×3 resize is the mean of all four.
  const float sq[4] = {0, 1, 2, 3};
  float nine[9];
  resize_bilinear(sq, 2, 2, nine, 3, 3);
  CHECK(nine[4] == Approx(1.5f));
  CHECK(nine[0] == 0.0f);
  CHECK(nine[8] == 3.0f);

  // Through image_to_tensor: scale to [0, 1] and normalise.
  Image img{2, 1, 1, {0, 255}};
  Tensor t = image_to_tensor(img, 1, 1, 4);
  CHECK(t.shape() == Shape{1, 1, 4});
  CHECK(t.data<float>()[1] == Approx(0.25f));
  normalize_image(t, Normalization{{0.5f}, {0.25f}});
  CHECK(t.data<float>()[0] == Approx(-2.0f));
  CHECK(t.data<float>()[3] == Approx(2.0f));
}

TEST_CASE("bad image files fail with a message naming the file", "[image]") {
  const fs::path dir = temp_dir("bad");
  write_bytes(dir / "empty.png", "");
  CHECK_THAT(error_of([&] { read_image((dir / "empty.png").string()); }),
             Catch::Contains("empty.png") && Catch::Contains("is empty (0 bytes)"));

  write_bytes(dir / "notes.png", "these are my notes, not a picture\n");
  CHECK_THAT(error_of([&] { read_image((dir / "notes.png").string()); }),
             Catch::Contains("notes.png") && Catch::Contains("cannot read image") && Catch::Contains("PNG, JPEG"));

  CHECK_THAT(error_of([&] { read_image((dir / "missing.png").string()); }),
             Catch::Contains("missing.png") && Catch::Contains("cannot open"));

  // Truncated: a valid header, half of the compressed data.
  const auto noise = pixels(64, 64, 3, [](int x, int y, int c) { return (x * 37 + y * 91 + c * 17) % 251; });
  write_png(dir / "full.png", 64, 64, 3, noise);
  const std::string full = read_bytes(dir / "full.png");
  write_bytes(dir / "cut.png", full.substr(0, full.size() / 2));
  CHECK_THAT(error_of([&] { read_image((dir / "cut.png").string()); }),
             Catch::Contains("cut.png") && Catch::Contains("truncated or corrupt"));

  // Huge claimed size: patch the PNG header (IHDR width at byte 16, height at 20, big-endian;
  // stb_image does not check the CRC). 20000×100 passes stb's own limit, not nnlab's.
  std::string huge = full;
  const unsigned char dims[8] = {0, 0, 0x4e, 0x20, 0, 0, 0, 100};  // 20000, 100
  huge.replace(16, 8, reinterpret_cast<const char*>(dims), 8);
  write_bytes(dir / "huge.png", huge);
  CHECK_THAT(error_of([&] { read_image_info((dir / "huge.png").string()); }),
             Catch::Contains("huge.png") && Catch::Contains("claims 20000x100 pixels"));
  fs::remove_all(dir);
}

TEST_CASE("image folders: sorted classes, common shape, seeded disjoint test split", "[folder]") {
  const fs::path root = temp_dir("folder");
  // 6 images per class; pixel value encodes (class, index) so samples can be identified.
  // The first image (cat/0.png) is 6×4 gray; dog/3.png is 8×8 RGB, so all become 3×4×6.
  int id = 0;
  for (const std::string cls : {"dog", "cat"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < 6; ++i, ++id) {
      const int v = 10 * id + 5;
      if (cls == "dog" && i == 3)
        write_png(root / cls / (std::to_string(i) + ".png"), 8, 8, 3, pixels(8, 8, 3, [&](int, int, int) { return v; }));
      else
        write_png(root / cls / (std::to_string(i) + ".png"), 6, 4, 1, pixels(6, 4, 1, [&](int, int, int) { return v; }));
    }
  }
  write_bytes(root / "cat" / "README.txt", "ignored: not an image extension");

  const Dataset train = load_dataset("folder", root.string(), "train");
  const Dataset test = load_image_folder(root.string(), "test");
  CHECK(train.class_names == std::vector<std::string>{"cat", "dog"});
  CHECK(train.classes == 2);
  CHECK(train.images.shape() == Shape{10, 3, 4, 6});
  CHECK(test.images.shape() == Shape{2, 3, 4, 6});  // round(0.2 · 12)
  std::multiset<int> seen;
  for (const Dataset* d : {&train, &test})
    for (int64_t i = 0; i < d->size(); ++i) {
      const int v = static_cast<int>(std::lround(d->images.data<float>()[i * 72] * 255));
      const int source = (v - 5) / 10;  // 0..5 were dog (listed second), 6..11 cat
      CHECK(d->labels.data<int32_t>()[i] == (source >= 6 ? 0 : 1));
      seen.insert(source);
    }
  CHECK(seen == std::multiset<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});  // disjoint and complete
  // Seeded: the same split every time.
  CHECK(load_image_folder(root.string(), "test").labels.to_vector<int32_t>() == test.labels.to_vector<int32_t>());

  // A file that cannot be read fails the load, by name.
  write_bytes(root / "dog" / "broken.jpg", "");
  CHECK_THAT(error_of([&] { load_image_folder(root.string(), "train"); }),
             Catch::Contains("1 file(s) cannot be read") && Catch::Contains("broken.jpg"));
  fs::remove_all(root);
}

TEST_CASE("image folders with train/ and test/ use them as the splits", "[folder]") {
  const fs::path root = temp_dir("presplit");
  for (const std::string split : {"train", "test"})
    for (const std::string cls : {"a", "b", "c"}) {
      fs::create_directories(root / split / cls);
      write_png(root / split / cls / "x.png", 3, 3, 1, pixels(3, 3, 1, [](int, int, int) { return 1; }));
    }
  write_png(root / "train" / "c" / "y.png", 3, 3, 1, pixels(3, 3, 1, [](int, int, int) { return 1; }));
  CHECK(load_image_folder(root.string(), "train").size() == 4);
  const Dataset test = load_image_folder(root.string(), "test");
  CHECK(test.size() == 3);
  CHECK(test.labels.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 2});

  fs::create_directories(root / "test" / "zebra");
  CHECK_THROWS_WITH(load_image_folder(root.string(), "test"), Catch::Contains("zebra"));
  CHECK_THROWS_WITH(load_image_folder((root / "nowhere").string(), "train"), Catch::Contains("does not exist"));
  fs::remove_all(root);
}

TEST_CASE("nnlab train --data folder trains on an image folder and names bad files", "[folder]") {
  const fs::path root = temp_dir("cli");
  for (int cls = 0; cls < 2; ++cls) {
    fs::create_directories(root / ("class" + std::to_string(cls)));
    for (int i = 0; i < 10; ++i)
      write_png(root / ("class" + std::to_string(cls)) / (std::to_string(i) + ".png"), 8, 8, 1,
                pixels(8, 8, 1, [&](int x, int, int) { return cls ? 20 * x : 200 - 20 * x; }));
  }
  auto run = [](const std::string& args, std::string& out) {
    const std::string cmd = std::string(NNLAB_CLI_PATH) + " " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe);
    std::array<char, 4096> buf{};
    out.clear();
    while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  const std::string args = "train --data folder --data-dir " + root.string() +
                           " --model mlp --epochs 2 --batch 4 --threads 1 --log-interval 2";
  CHECK(run(args, out) == 0);
  CHECK_THAT(out, Catch::Contains("16 train / 4 test images"));
  // Not a terminal: plain progress lines at the log interval and the last step.
  CHECK_THAT(out, Catch::Contains("  epoch 1/2  step 2/4  loss ") && Catch::Contains("  epoch 2/2  step 4/4  loss "));
  CHECK_THAT(out, !Catch::Contains("\r"));

  write_bytes(root / "class1" / "bad.png", "not a png");
  CHECK(run(args, out) == 1);
  CHECK_THAT(out, Catch::Contains("bad.png") && Catch::Contains("cannot be read"));
  CHECK(run("train --data folder --model mlp", out) == 1);
  CHECK_THAT(out, Catch::Contains("--data-dir is required for --data folder"));
  fs::remove_all(root);
}

TEST_CASE("progress: plain lines at the log interval, a bar with ETA on a terminal", "[progress]") {
  EpochProgress plain(2, 5, 10, 4, false);
  CHECK(!plain.due(3));
  CHECK(plain.due(4));
  CHECK(plain.due(8));
  CHECK(plain.due(10));  // the last step always
  CHECK(plain.line(4, 0.51234, 31000, 1.0) == "  epoch 2/5  step 4/10  loss 0.5123  31000 img/s");

  EpochProgress bar(1, 5, 938, 100, true);
  CHECK(bar.due(938));
  // 469 of 938 steps in 10 s: half the bar, 10 s to go.
  CHECK(bar.line(469, 0.5123, 31000, 10.0) ==
        "epoch 1/5 [##########..........] 469/938 loss 0.5123 31000 img/s ETA 0:10");
  // Resumed after 400 steps: 69 steps in 10 s leave 469 to go, 68 s.
  bar.skip_to(400);
  CHECK(bar.line(469, 0.5123, 31000, 10.0) ==
        "epoch 1/5 [##########..........] 469/938 loss 0.5123 31000 img/s ETA 1:08");
  CHECK(EpochProgress::format_duration(0) == "0:00");
  CHECK(EpochProgress::format_duration(754) == "12:34");
  CHECK(EpochProgress::format_duration(3723) == "1:02:03");

  // show() writes one line per call when not a terminal.
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  EpochProgress to_file(1, 1, 2, 1, false, f);
  to_file.show(1, 1.0, 10);
  to_file.show(2, 0.5, 10);
  to_file.finish();
  std::rewind(f);
  std::array<char, 256> buf{};
  std::string text;
  while (std::fgets(buf.data(), buf.size(), f)) text += buf.data();
  std::fclose(f);
  CHECK(text == "  epoch 1/1  step 1/2  loss 1.0000  10 img/s\n  epoch 1/1  step 2/2  loss 0.5000  10 img/s\n");
}
