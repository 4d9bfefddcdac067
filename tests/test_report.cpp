// `nnlab report` and `train --report` end to end: the page drawn from run records, several
// runs overlaid, and the refusals (missing, empty, damaged or foreign record files, an
// unwritable or dangerous output path) that end in one message, a non-zero exit and no page.
// How the pages look in a browser is checked in headless Chromium (report_browser_test.py).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_support.h"

using nnlab_test::CliResult;
using nnlab_test::count_of;
using nnlab_test::kFashion;
using nnlab_test::read_text;
using nnlab_test::run_cli;
using nnlab_test::TempDir;
namespace fs = std::filesystem;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The records a two-epoch run with --metrics-every 50 writes, in its format (trainer.cpp).
std::string run_records(const std::string& optimizer, double loss_scale) {
  nlohmann::json run = {{"type", "run"}, {"model", "mlp"}, {"parameters", 235146}, {"data", "fashion-mnist"},
                        {"device", "cpu"}, {"simulated", false}, {"optimizer", optimizer}, {"batch", 64},
                        {"epochs", 2}, {"seed", 0}, {"threads", 2}, {"cpu", "test CPU"},
                        {"environment", {{"commit", "abc"}, {"config", {{"optimizer", {{"name", optimizer}}}}}}}};
  std::string out = run.dump() + "\n";
  for (int epoch = 1; epoch <= 2; ++epoch) {
    for (int s = 1; s <= 2; ++s) {
      const int step = (epoch - 1) * 100 + s * 50;
      out += nlohmann::json{{"type", "step"}, {"epoch", epoch}, {"step", step}, {"loss", loss_scale / step}}.dump() + "\n";
    }
    out += nlohmann::json{{"type", "epoch"}, {"epoch", epoch}, {"device", "cpu"}, {"steps", 100},
                          {"train_loss", loss_scale / epoch}, {"test_accuracy", 0.7 + 0.05 * epoch}, {"seconds", 2.0},
                          {"images_per_second", 3200.0},
                          {"phase_seconds", {{"data", 0.1}, {"forward", 0.5}, {"backward", 1.0}, {"optimizer", 0.4}}}}
               .dump() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("report overlays several runs on one self-contained page", "[report]") {
  const TempDir dir("nnlab_report");
  write_file(dir / "sgd.jsonl", run_records("sgd", 1.0));
  write_file(dir / "adam.jsonl", run_records("adam", 0.8));
  const CliResult r = run_cli("report " + (dir / "sgd.jsonl") + " " + (dir / "adam.jsonl") + " -o " + (dir / "r.html"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(dir / "r.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Loss and accuracy per epoch, loss per step, images/s; and the phase bars.
  CHECK(count_of(html, "<figure class='chart'>") == 5);
  CHECK(count_of(html, "data-name='sgd'") == 4);  // one line per curve and run
  CHECK(count_of(html, "data-name='adam'") == 4);
  CHECK(html.find("The options that differ between the runs") != std::string::npos);
  CHECK(html.find("optimizer.name") != std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<script src") == std::string::npos);
  // Nothing left beside it: the temporary file was renamed into place.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 3);
}

TEST_CASE("report keeps the records before a line cut off by a crash", "[report]") {
  const TempDir dir("nnlab_report");
  write_file(dir / "cut.jsonl", run_records("sgd", 1.0) + "{\"type\":\"step\",\"epo");
  const CliResult r = run_cli("report " + (dir / "cut.jsonl") + " -o " + (dir / "r.html"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(read_text(dir / "r.html").find("the last record was cut off") != std::string::npos);
}

TEST_CASE("report refuses bad record files and output paths, writing nothing", "[report]") {
  const TempDir dir("nnlab_report");
  const std::string good = dir / "good.jsonl", out = dir / "r.html";
  write_file(good, run_records("sgd", 1.0));
  write_file(out, "an older report");
  write_file(dir / "empty.jsonl", "");
  write_file(dir / "binary.jsonl", std::string("\x89PNG\r\n\x1a\n\0\0\0", 11));
  write_file(dir / "array.jsonl", "[1, 2, 3]\n");
  write_file(dir / "compare.jsonl", "{\"type\":\"compare\",\"model\":\"mlp\"}\n");
  write_file(dir / "sweep.jsonl", "{\"model\":\"mlp\",\"batch\":8,\"ratio\":1.5}\n");
  write_file(dir / "started.jsonl", run_records("sgd", 1.0).substr(0, run_records("sgd", 1.0).find('\n') + 1));
  std::string damaged = run_records("sgd", 1.0);
  damaged.replace(damaged.find("\"train_loss\""), 12, "\"trian_loss\"");
  write_file(dir / "damaged.jsonl", damaged);
  std::string middle = run_records("sgd", 1.0);
  middle.insert(middle.find('\n') + 1, "not json at all\n");
  write_file(dir / "middle.jsonl", middle);
  write_file(dir / "unknown.jsonl", run_records("sgd", 1.0) + "{\"type\":\"weather\"}\n");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"report " + (dir / "missing.jsonl") + " -o " + out, "does not exist"},
      {"report " + dir.path.string() + " -o " + out, "is a folder, not a file"},
      {"report " + (dir / "empty.jsonl") + " -o " + out, "is empty"},
      {"report " + (dir / "binary.jsonl") + " -o " + out, "line 1 is not JSON"},
      {"report " + (dir / "array.jsonl") + " -o " + out, "line 1 is not a JSON object"},
      {"report " + (dir / "compare.jsonl") + " -o " + out, "records of `nnlab compare`"},
      {"report " + (dir / "sweep.jsonl") + " -o " + out, "records of `nnlab sweep`"},
      {"report " + (dir / "started.jsonl") + " -o " + out, "holds no finished epoch"},
      {"report " + (dir / "damaged.jsonl") + " -o " + out, "line 4 has no number \"train_loss\""},
      {"report " + (dir / "middle.jsonl") + " -o " + out, "line 2 is not JSON"},
      {"report " + (dir / "unknown.jsonl") + " -o " + out, "unknown type \"weather\""},
      {"report " + good + " " + (dir / "missing.jsonl") + " -o " + out, "missing.jsonl' does not exist"},
      {"report " + good + " -o " + (dir / "no-such-folder/r.html"), "does not exist"},
      {"report " + good + " -o " + dir.path.string(), "must name a file"},
      {"report " + good + " -o " + good, "would destroy it"},
      {"report -o " + out, "runs is required"},
      {"report " + good, "--output is required"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(args);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(message) != std::string::npos);
    CHECK(read_text(out) == "an older report");
    CHECK(read_text(good) == run_records("sgd", 1.0));
  }
  // Only the files written above: no page, no temporary file.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 11);
}

TEST_CASE("train --report writes the run's page when it ends", "[report][cli]") {
  if (!fs::exists(kFashion)) {
    WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
    return;
  }
  const TempDir dir("nnlab_report");
  const std::string common = "train --model mlp --epochs 1 --max-steps 20 --batch 32 --threads 1 ";
  // With --metrics the records are kept and the page names the file.
  const CliResult kept = run_cli(common + "--metrics " + (dir / "m.jsonl") + " --report " + (dir / "kept.html"));
  INFO(kept.output);
  REQUIRE(kept.exit_code == 0);
  const std::string html = read_text(dir / "kept.html");
  CHECK(html.find("nnlab run: m") != std::string::npos);
  CHECK(count_of(html, "<figure class='chart'>") == 4);  // no step records: no per-step chart
  // Without --metrics the records go to a scratch file, removed after; the page is named
  // after itself.
  const CliResult scratch = run_cli(common + "--report " + (dir / "alone.html"));
  INFO(scratch.output);
  REQUIRE(scratch.exit_code == 0);
  CHECK(read_text(dir / "alone.html").find("nnlab run: alone") != std::string::npos);
  CHECK(read_text(dir / "alone.html").find("records not kept") != std::string::npos);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 3);
  // A run that fails is the one most worth looking at: its page is written before the error.
  const CliResult nan = run_cli(common + "--lr 1e8 --metrics-every 1 --log-interval 5 --report " + (dir / "nan.html"));
  INFO(nan.output);
  CHECK(nan.exit_code == 1);
  CHECK(nan.output.find("NaN or infinite") != std::string::npos);
  const std::string nan_html = read_text(dir / "nan.html");
  CHECK(nan_html.find("No epoch finished") != std::string::npos);
  CHECK(nan_html.find("the loss was NaN or infinite at step") != std::string::npos);
  CHECK(count_of(nan_html, "<figure class='chart'>") == 1);  // the recorded steps only
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 4);
  // A report path that cannot be written stops the run before it trains or writes anything.
  const CliResult bad = run_cli(common + "--metrics " + (dir / "x.jsonl") + " --report " + (dir / "no/r.html"));
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--report") != std::string::npos);
  CHECK(bad.output.find("epoch 1/1") == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x.jsonl"));
}
