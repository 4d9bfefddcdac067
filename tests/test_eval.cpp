// `nnlab eval --checkpoint FILE`: the accuracy the trainer reported, per-class accuracy with
// class names, a confusion matrix whose rows are the true classes; bad checkpoints refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "core/serialization.h"

using nnlab_test::CliResult;
using nnlab_test::run_cli;
using nnlab_test::TempDir;

namespace {

// Debian's dataset-fashion-mnist, which these tests train and evaluate on (scripts/setup.sh
// installs it); without it they say so and check nothing.
bool fashion_mnist_installed() {
  if (std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) return true;
  WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
  return false;
}

}  // namespace

// A --precision bf16 run's checkpoint evaluates in bf16, as the trainer evaluated it, and its
// run resumes only in bf16.
TEST_CASE("a bf16 run's checkpoint evaluates in bf16 and resumes only in bf16", "[eval][precision]") {
  if (!fashion_mnist_installed()) return;
  const TempDir tmp("nnlab_eval");
  const std::string d = tmp / "run";
  const CliResult train =
      run_cli("train --model mlp --epochs 1 --max-steps 30 --threads 2 --precision bf16 --checkpoint-dir " + d);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(train.output, m, std::regex("final test accuracy ([0-9.]+)%")));
  const CliResult r = run_cli("eval --checkpoint " + d + "/last.safetensors --threads 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("in bf16 as it was trained") != std::string::npos);
  CHECK(r.output.find("test accuracy " + std::string(m[1]) + "% (") != std::string::npos);

  const CliResult fp32 = run_cli("train --resume " + d + "/last.safetensors --epochs 2 --threads 2");
  CHECK(fp32.exit_code != 0);
  CHECK(fp32.output.find("saved by a run with --precision \"bf16\", not \"fp32\"") != std::string::npos);
  const CliResult bf16 =
      run_cli("train --resume " + d + "/last.safetensors --epochs 1 --max-steps 40 --threads 2 --precision bf16");
  INFO(bf16.output);
  CHECK(bf16.exit_code == 0);
}

TEST_CASE("eval reports accuracy, per-class accuracy and the confusion matrix", "[eval]") {
  if (!fashion_mnist_installed()) return;
  const TempDir tmp("nnlab_eval");
  const std::string d = tmp / "run";
  const CliResult train = run_cli("train --model mlp --epochs 1 --max-steps 30 --threads 2 --normalize dataset "
                                  "--checkpoint-dir " + d);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(train.output, m, std::regex("final test accuracy ([0-9.]+)%")));
  const std::string trained_accuracy = m[1];

  const CliResult r = run_cli("eval --checkpoint " + d + "/last.safetensors --threads 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // The same model, data and normalisation as the trainer's own evaluation.
  CHECK(r.output.find("test accuracy " + trained_accuracy + "% (") != std::string::npos);
  CHECK(r.output.find("model mlp") != std::string::npos);
  CHECK(r.output.find("T-shirt/top") != std::string::npos);
  CHECK(r.output.find("Ankle boot") != std::string::npos);
  REQUIRE(r.output.find("confusion matrix (rows = true class, columns = predicted class):") != std::string::npos);
  // Every row of the matrix sums to that class's 1000 test images; the diagonal to the correct count.
  std::istringstream lines(r.output.substr(r.output.find("confusion matrix")));
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);  // column header
  int64_t diagonal = 0;
  for (int t = 0; t < 10; ++t) {
    REQUIRE(std::getline(lines, line));
    std::istringstream row(line);
    int64_t label = -1, v = 0, sum = 0;
    row >> label;
    CHECK(label == t);
    for (int p = 0; p < 10 && row >> v; ++p) {
      sum += v;
      if (p == t) diagonal += v;
    }
    CHECK(sum == 1000);
  }
  REQUIRE(std::regex_search(r.output, m, std::regex("\\((\\d+)/10000\\)")));
  CHECK(std::stoll(m[1]) == diagonal);
}

TEST_CASE("eval refuses missing, damaged and foreign checkpoints", "[eval]") {
  const TempDir tmp("nnlab_eval");
  const std::string d = tmp.path.string();
  const std::string truncated = d + "/short.safetensors", corrupt = d + "/corrupt.safetensors",
                    foreign = d + "/foreign.safetensors";
  std::ofstream(truncated, std::ios::binary) << "abcd";
  {
    std::ofstream out(corrupt, std::ios::binary);
    const std::string header = "{not json";
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header;
  }
  nnlab::save_safetensors(foreign, {{"w", nnlab::Tensor::zeros({2})}}, {{"format", "pt"}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval --checkpoint " + d + "/missing.safetensors", "does not exist"},
      {"eval --checkpoint " + truncated, "is truncated"},
      {"eval --checkpoint " + corrupt, "corrupt JSON header"},
      {"eval --checkpoint " + foreign, "not an nnlab checkpoint"},
      {"eval", "--checkpoint is required"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(args);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(message) != std::string::npos);
  }
}
