// `nnlab compare` end to end on CPU run variants (thread counts, convolution
// implementations): the side-by-side table, the JSON records, the self-contained HTML
// report, and the refusals (unknown device, unusable CUDA, unwritable report) that happen
// before any training and write nothing.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>

#include "cli_support.h"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "devices/registry.h"

namespace fs = std::filesystem;

using nnlab_test::run_cli;
using nnlab_test::CliResult;
using nnlab_test::count_of;
using nnlab_test::read_text;

namespace {

std::vector<nlohmann::json> read_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Runs `compare <args> --metrics <dir>/m.jsonl` for two variants and returns its records:
// the run's, then one per variant.
std::vector<nlohmann::json> compare_records(const std::string& args, const nnlab_test::TempDir& dir) {
  const CliResult r = run_cli("compare " + args + " --metrics " + (dir / "m.jsonl"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<nlohmann::json> records = read_records(dir / "m.jsonl");
  REQUIRE(records.size() == 3);
  return records;
}

}  // namespace

TEST_CASE("compare runs the identical training on two CPU thread counts", "[compare]") {
  nnlab_test::TempDir dir("nnlab_cmd");
  const CliResult r = run_cli("compare --model mlp --devices cpu:threads=1,cpu:threads=2 --max-steps 3 --batch 8 "
                              "--test-images 100 --report " + (dir / "r.html") + " --metrics " + (dir / "m.jsonl"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("speed-up") != std::string::npos);
  CHECK(r.output.find("drift of cpu:threads=2 from cpu:threads=1") != std::string::npos);
  CHECK(r.output.find("fc1.weight") != std::string::npos);

  const std::vector<nlohmann::json> records = read_records(dir / "m.jsonl");
  REQUIRE(records.size() == 3);
  CHECK(records[0]["type"] == "compare");
  CHECK(records[1]["variant"] == "cpu:threads=1");
  CHECK(records[1]["threads"] == 1);
  CHECK(records[2]["threads"] == 2);
  REQUIRE(records[1]["step_loss"].size() == 3);
  REQUIRE(records[2]["step_loss"].size() == 3);
  // The same first batch through the same initial weights: the first losses agree to rounding.
  CHECK(std::abs(records[1]["step_loss"][0].get<double>() - records[2]["step_loss"][0].get<double>()) < 1e-5);
  CHECK(records[2]["drift"]["weight_relative_l2"]["fc1.weight"].get<double>() < 1e-5);

  const std::string html = read_text(dir / "r.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count_of(html, "<svg") >= 3);  // loss curves, phase bars, drift
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<script src") == std::string::npos);  // its one script is inline
  CHECK(html.find("cpu:threads=2") != std::string::npos);
}

TEST_CASE("compare of the reference and im2col convolutions tracks to float rounding", "[compare]") {
  nnlab_test::TempDir dir("nnlab_cmd");
  const std::vector<nlohmann::json> records = compare_records(
      "--model cnn --devices cpu:conv=reference,cpu:conv=im2col --threads 2 --max-steps 2 --batch 4 --test-images 20",
      dir);
  CHECK(records[1]["conv_impl"] == "reference");
  CHECK(records[2]["conv_impl"] == "im2col");
  CHECK(records[2]["drift"]["max_loss_diff"].get<double>() < 1e-4);
  for (const auto& [name, v] : records[2]["drift"]["weight_relative_l2"].items()) {
    INFO(name);
    CHECK(v.get<double>() < 1e-4);
  }
}

TEST_CASE("compare refuses bad devices and report paths before training, writing nothing", "[compare]") {
  nnlab_test::TempDir dir("nnlab_cmd");
  const std::string report = dir / "r.html", metrics = dir / "m.jsonl";
  const std::string outputs = " --max-steps 1 --report " + report + " --metrics " + metrics;

  const CliResult unknown = run_cli("compare --model mlp --devices cpu,tpu" + outputs);
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.output.find("unknown device 'tpu'") != std::string::npos);

  const CliResult setting = run_cli("compare --model mlp --devices cpu:threads=1,cpu:speed=9" + outputs);
  CHECK(setting.exit_code != 0);
  CHECK(setting.output.find("unknown setting 'speed'") != std::string::npos);

  const CliResult one = run_cli("compare --model mlp --devices cpu" + outputs);
  CHECK(one.exit_code != 0);
  CHECK(one.output.find("at least two run variants") != std::string::npos);

  const CliResult cudnn = run_cli("compare --model cnn --devices cpu,cpu:conv=cudnn" + outputs);
  CHECK(cudnn.exit_code != 0);
  CHECK(cudnn.output.find("cudnn runs on CUDA only") != std::string::npos);

  const CliResult tf32 = run_cli("compare --model mlp --devices cpu,cpu:precision=tf32" + outputs);
  CHECK(tf32.exit_code != 0);
  CHECK(tf32.output.find("precision=tf32 is the math mode of float32 tensors: write cpu:math=tf32") !=
        std::string::npos);

  // --math would apply to no variant (each sets its own): refused, not ignored.
  const CliResult math = run_cli("compare --model mlp --devices cpu,cuda --math tf32" + outputs);
  CHECK(math.exit_code != 0);
  CHECK(math.output.find("compare sets the math mode per device") != std::string::npos);
  CHECK(math.output.find("cuda:math=tf32") != std::string::npos);

  const CliResult rung = run_cli("compare --model mlp --devices cpu,cpu:reduce=tree" + outputs);
  CHECK(rung.exit_code != 0);
  CHECK(rung.output.find("--reduce-impl tree is a CUDA kernel of the reduction ladder") != std::string::npos);

  if (!nnlab::cuda_status().usable) {
    const CliResult cuda = run_cli("compare --model mlp --devices cpu,cuda" + outputs);
    CHECK(cuda.exit_code != 0);
    CHECK(cuda.output.find("device 'cuda': CUDA is not usable here") != std::string::npos);
    CHECK(cuda.output.find("steps in") == std::string::npos);  // nothing trained
  }

  const CliResult unwritable =
      run_cli("compare --model mlp --devices cpu:threads=1,cpu:threads=2 --max-steps 1 --report " +
              (dir / "missing/r.html"));
  CHECK(unwritable.exit_code != 0);
  CHECK(unwritable.output.find("--report") != std::string::npos);
  CHECK(unwritable.output.find("does not exist") != std::string::npos);
  CHECK(unwritable.output.find("steps in") == std::string::npos);

  CHECK_FALSE(fs::exists(report));
  CHECK_FALSE(fs::exists(metrics));
  CHECK_FALSE(fs::exists(dir / "missing"));
}

// fp32 against bf16 on one device, as the variant key :precision= says: each variant's record
// names its precision, the bf16 one trains (its first loss near the float32 one: the same batch
// through the same weights, rounded to bf16) and its master weights drift only a little.
TEST_CASE("compare trains fp32 against bf16 side by side", "[compare][precision]") {
  nnlab_test::TempDir dir("nnlab_cmd");
  const std::vector<nlohmann::json> records = compare_records(
      "--model mlp --devices cpu,cpu:precision=bf16 --max-steps 3 --batch 16 --test-images 100 --threads 1", dir);
  CHECK(records[1]["precision"] == "fp32");
  CHECK(records[2]["precision"] == "bf16");
  CHECK(records[2]["variant"] == "cpu:precision=bf16");
  const double fp32 = records[1]["step_loss"][0].get<double>(), bf16 = records[2]["step_loss"][0].get<double>();
  CHECK(fp32 != bf16);
  CHECK(std::abs(fp32 - bf16) < 0.05 * fp32);
  const double drift = records[2]["drift"]["weight_relative_l2"]["fc1.weight"].get<double>();
  CHECK(drift > 0.0);
  CHECK(drift < 0.05);
}
