// `nnlab predict` end to end: a short training run saves a checkpoint, Fashion-MNIST test
// images saved as PNG are classified; bad input fails with a message, exit code 1 and no
// predictions printed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_support.h"
#include "datasets/dataset.h"

#include <stb_image_write.h>  // its implementation: stb_image_write_impl.cpp

namespace fs = std::filesystem;
using nnlab_test::SplitResult;
using nnlab_test::run_cli_split;

namespace {

// Files and sizes under dir, to show a failed command changed nothing.
std::vector<std::pair<std::string, uintmax_t>> listing(const fs::path& dir) {
  std::vector<std::pair<std::string, uintmax_t>> files;
  for (const auto& e : fs::directory_iterator(dir))
    files.emplace_back(e.path().string(), e.is_regular_file() ? e.file_size() : 0);
  std::sort(files.begin(), files.end());
  return files;
}

struct Prediction {
  std::string path;
  std::vector<std::pair<std::string, double>> top;  // class name, probability
};

std::vector<Prediction> parse(const std::string& out) {
  std::vector<Prediction> result;
  std::istringstream in(out);
  std::string line;
  const std::regex ranked(R"(  (\d+)\. (.+?) +([01]\.\d{4}))");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, ranked)) {
      REQUIRE(!result.empty());
      CHECK(std::stoi(m[1]) == static_cast<int>(result.back().top.size()) + 1);
      result.back().top.emplace_back(m[2], std::stod(m[3]));
    } else {
      result.push_back({line, {}});
    }
  }
  return result;
}

}  // namespace

TEST_CASE("nnlab predict classifies Fashion-MNIST test images saved as PNG", "[predict]") {
  const nnlab_test::TempDir tmp("nnlab_predict");
  const fs::path& dir = tmp.path;
  fs::create_directories(dir / "ckpt");
  const SplitResult train = run_cli_split("train --model mlp --epochs 1 --max-steps 150 --checkpoint-every 150 "
                                          "--threads 2 --seed 1 --checkpoint-dir " + (dir / "ckpt").string());
  REQUIRE(train.exit_code == 0);
  const std::string ckpt = (dir / "ckpt" / "last.safetensors").string();
  REQUIRE(fs::exists(ckpt));

  // 20 test images as 28×28 gray PNG; the first also as a 56×56 RGB PNG made of 2×2 blocks
  // of R = G = B, which the bilinear resize and BT.601 luminance map back to the original.
  const nnlab::Dataset test = nnlab::load_dataset("fashion-mnist", nnlab::default_data_dir("fashion-mnist"), "test");
  std::string args = "predict --top-k 3 --threads 2 --checkpoint " + ckpt;
  std::vector<int32_t> labels;
  for (int i = 0; i < 20; ++i) {
    std::vector<uint8_t> px(28 * 28);
    for (int j = 0; j < 28 * 28; ++j)
      px[j] = test.images.data<uint8_t>()[i * 784 + j];
    const fs::path p = dir / ("img" + std::to_string(i) + ".png");
    REQUIRE(stbi_write_png(p.c_str(), 28, 28, 1, px.data(), 28) != 0);
    args += " " + p.string();
    labels.push_back(test.labels.data<int32_t>()[i]);
    if (i == 0) {
      std::vector<uint8_t> big(56 * 56 * 3);
      for (int y = 0; y < 56; ++y)
        for (int x = 0; x < 56; ++x)
          for (int c = 0; c < 3; ++c) big[(y * 56 + x) * 3 + c] = px[(y / 2) * 28 + x / 2];
      REQUIRE(stbi_write_png((dir / "big.png").c_str(), 56, 56, 3, big.data(), 56 * 3) != 0);
    }
  }
  args += " " + (dir / "big.png").string();

  const auto before = listing(dir / "ckpt");
  const SplitResult r = run_cli_split(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<Prediction> preds = parse(r.out);
  REQUIRE(preds.size() == 21);
  const std::vector<std::string> names = test.class_names;
  int correct = 0;
  for (size_t i = 0; i < preds.size(); ++i) {
    CHECK(preds[i].path == (i < 20 ? (dir / ("img" + std::to_string(i) + ".png")).string() : (dir / "big.png").string()));
    REQUIRE(preds[i].top.size() == 3);
    double total = 0;
    for (size_t k = 0; k < 3; ++k) {
      CHECK(std::find(names.begin(), names.end(), preds[i].top[k].first) != names.end());
      if (k > 0) CHECK(preds[i].top[k].second <= preds[i].top[k - 1].second);
      total += preds[i].top[k].second;
    }
    CHECK(total <= 1.0005);
    if (i < 20 && preds[i].top[0].first == names[labels[i]]) ++correct;
  }
  CHECK(correct >= 12);  // ~75 % after 150 steps; chance is 10 %
  CHECK(preds[20].top == preds[0].top);  // same image, other size and colour: same answer
  CHECK(listing(dir / "ckpt") == before);

  {  // an unreadable image: named on stderr, exit 1, nothing predicted
    std::ofstream(dir / "notes.png") << "not an image";
    const SplitResult bad = run_cli_split("predict --checkpoint " + ckpt + " " + (dir / "img0.png").string() + " " +
                                          (dir / "notes.png").string() + " " + (dir / "gone.jpg").string());
    CHECK(bad.exit_code == 1);
    CHECK(bad.out.empty());
    CHECK_THAT(bad.err, Catch::Contains("2 of 3 image(s) cannot be read; nothing was predicted") &&
                            Catch::Contains("notes.png") && Catch::Contains("gone.jpg"));
  }
  {  // a missing checkpoint, a bad --top-k
    const SplitResult missing = run_cli_split("predict --checkpoint " + (dir / "nope.safetensors").string() + " " +
                                              (dir / "img0.png").string());
    CHECK(missing.exit_code == 1);
    CHECK(missing.out.empty());
    CHECK_THAT(missing.err, Catch::Contains("nope.safetensors"));
    const SplitResult k0 =
        run_cli_split("predict --top-k 0 --checkpoint " + ckpt + " " + (dir / "img0.png").string());
    CHECK(k0.exit_code == 1);
    CHECK_THAT(k0.err, Catch::Contains("--top-k must be at least 1"));
  }
  CHECK(listing(dir / "ckpt") == before);
}
