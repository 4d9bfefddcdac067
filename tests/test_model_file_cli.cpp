// Model files end to end: a user's copy of cnn trains bit for bit as --model cnn; the example
// files of docs/examples train, and their checkpoints evaluate and resume without the
// original file; bad files stop before anything is written; the PyTorch twin
// (scripts/torch_model.py) agrees with nnlab where python3-torch is installed.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

using nnlab_test::CliResult;
using nnlab_test::kFashion;
using nnlab_test::read_text;
using nnlab_test::run_cli;
using nnlab_test::run_shell;
using nnlab_test::step_losses;
using nnlab_test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kExamples = std::string(NNLAB_TEST_DIR) + "/../docs/examples/";

bool have_fashion() {
  if (fs::exists(kFashion)) return true;
  WARN("dataset-fashion-mnist is not installed; scripts/setup.sh installs it");
  return false;
}

// "/usr/bin/python3" when it imports torch (Debian's python3-torch), else "" (and says so).
std::string python_with_torch() {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0) return "/usr/bin/python3";
  WARN("python3-torch is not installed; skipping the PyTorch twin checks");
  return "";
}

// "test accuracy 60.56% (6056/10000)" -> "(6056/10000)"
std::string correct_count(const std::string& output) {
  const auto close = output.find("/10000)");
  if (close == std::string::npos) return "(none)";
  return output.substr(output.rfind('(', close), close + 7 - output.rfind('(', close));
}

}  // namespace

TEST_CASE("a model file with cnn's layers trains bit for bit as --model cnn", "[cli][model_file]") {
  if (!have_fashion()) return;
  const TempDir dir("nnlab_mf");
  // The user's copy: cnn's file with its own name, no layer names (positions instead) and no
  // recipe (the same optimizer given on the command line).
  const CliResult shown = run_cli("models --show cnn");
  REQUIRE(shown.exit_code == 0);
  nlohmann::json file = nlohmann::json::parse(shown.output);
  file["name"] = "my-cnn";
  file.erase("recipe");
  for (auto& layer : file["layers"]) layer.erase("name");
  std::ofstream(dir / "my-cnn.json") << file.dump(2);
  const std::string common = " --epochs 1 --max-steps 6 --seed 5 --threads 2 --metrics-every 1 --log-interval 1000";
  const CliResult zoo = run_cli("train --model cnn" + common + " --metrics " + (dir / "zoo.jsonl"));
  INFO(zoo.output);
  REQUIRE(zoo.exit_code == 0);
  const CliResult own = run_cli("train --model-file " + (dir / "my-cnn.json") + " --optimizer adam --lr 0.001" +
                                common + " --metrics " + (dir / "own.jsonl"));
  INFO(own.output);
  REQUIRE(own.exit_code == 0);
  const std::vector<double> a = step_losses(dir / "zoo.jsonl"), b = step_losses(dir / "own.jsonl");
  REQUIRE(a.size() == 6);
  CHECK(a == b);  // exact: the same float32 losses
  CHECK(read_text(dir / "own.jsonl").find("\"model\":\"my-cnn\"") != std::string::npos);
}

TEST_CASE("example model files train, and their checkpoints evaluate and resume without the file", "[cli][model_file]") {
  if (!have_fashion()) return;
  const std::string python = python_with_torch();
  for (const char* name : {"conv-bn-dropout", "small-resnet", "mlp-widths"}) {
    INFO(name);
    const TempDir dir("nnlab_mf");
    const std::string copy = dir / (std::string(name) + ".json"), ckpt = dir / "ck";
    fs::copy_file(kExamples + name + ".json", copy);
    // The runs evaluate on 1,000 test images: under the sanitizers a full evaluation costs
    // seconds, and this checks the files, not accuracy.
    const CliResult t = run_cli("train --model-file " + copy + " --epochs 1 --max-steps 3 --seed 2 --threads 2 "
                                "--test-images 1000 --checkpoint-dir " + ckpt);
    INFO(t.output);
    REQUIRE(t.exit_code == 0);
    fs::remove(copy);  // the checkpoint carries the model file
    // The Python twin below classifies all 10,000 test images; the other files' evaluations
    // take the first 1,000 (under the sanitizers small-resnet's full one took 11 s).
    const bool twin = !python.empty() && std::string(name) == "conv-bn-dropout";
    const CliResult e = run_cli("eval --checkpoint " + ckpt + "/last.safetensors --threads 2" +
                                (twin ? "" : " --test-images 1000"));
    INFO(e.output);
    REQUIRE(e.exit_code == 0);
    CHECK(e.output.find(std::string("model ") + name) != std::string::npos);
    CHECK(e.output.find(twin ? "(10000 images)" : "(1000 images)") != std::string::npos);
    if (std::string(name) == "mlp-widths") {
      const CliResult bad = run_cli("eval --checkpoint " + ckpt + "/last.safetensors --test-images -1");
      CHECK(bad.exit_code == 1);
      CHECK(bad.output.find("--test-images must be >= 0 (0 = all), got -1") != std::string::npos);
    }
    const CliResult r = run_cli("train --resume " + ckpt + "/last.safetensors --epochs 1 --max-steps 4 --seed 2 "
                                "--threads 2 --test-images 1000 --log-interval 1000");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("resuming from") != std::string::npos);
    // The twin built from the checkpoint's model file classifies the test set as nnlab does
    // (checked on the BatchNorm and Dropout model, where evaluation mode matters, to keep the
    // test short; docs/models.md shows all three).
    if (!twin) continue;
    const CliResult py = run_shell(python + " " + NNLAB_TEST_DIR + "/../scripts/torch_load_checkpoint.py " + ckpt +
                                   "/last.safetensors");
    INFO(py.output);
    REQUIRE(py.exit_code == 0);
    CHECK(correct_count(py.output) == correct_count(e.output));
  }
}

TEST_CASE("torch_replay.py reproduces a model file's steps with BatchNorm and Dropout", "[cli][model_file]") {
  if (!have_fashion()) return;
  const std::string python = python_with_torch();
  if (python.empty()) return;
  const CliResult r = run_shell(python + " " + NNLAB_TEST_DIR + "/../scripts/torch_replay.py --model-file " + kExamples +
                                "conv-bn-dropout.json --steps 5 --tolerance 1e-5 --threads 2 --nnlab " + NNLAB_CLI_PATH);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("steps 1-5: largest relative loss difference") != std::string::npos);
}

TEST_CASE("a bad model file stops train before anything is written", "[cli][model_file][bad_input]") {
  const TempDir dir("nnlab_mf");
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"{\"layers\": [{\"type\": \"flatten\"}, {\"name\": \"fc\", \"type\": \"linaer\"}]}",
       "layer 'fc' has an unknown type 'linaer'"},
      {"{\"layers\": [\n{\"type\": \"flatten\"}\n{\"type\": \"relu\"}]}", "is not valid JSON: parse error at line 3, column 1: syntax error while parsing array - unexpected '{'; expected ']'"},
      {"{\"layers\": [{\"type\": \"flatten\"}, {\"name\": \"huge\", \"type\": \"linear\", \"out_features\": 2000000000}]}",
       "layer 'huge' (linear): would hold 1.57e+12 parameters"},
      {"{\"layers\": [{\"name\": \"fc\", \"type\": \"linear\", \"out_features\": \"classes\"}]}",
       "layer 'fc' (linear): needs a flat input (features) but gets 1×28×28 per image"},
      {"", "is empty"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string file = dir / "bad.json", ckpt = dir / "ck", metrics = dir / "m.jsonl";
    std::ofstream(file) << c.text;
    const CliResult r = run_cli("train --model-file " + file + " --checkpoint-dir " + ckpt + " --metrics " + metrics);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("model file " + file) != std::string::npos);
    CHECK(r.output.find(c.message) != std::string::npos);
    CHECK_FALSE(fs::exists(ckpt));
    CHECK_FALSE(fs::exists(metrics));
  }
  const CliResult both = run_cli("train --model cnn --model-file " + (dir / "bad.json"));
  CHECK(both.exit_code != 0);
  CHECK(both.output.find("give --model NAME or --model-file FILE, not both") != std::string::npos);
  const CliResult show = run_cli("models --show nosuch");
  CHECK(show.exit_code != 0);
  CHECK(show.output.find("unknown model 'nosuch'") != std::string::npos);
}

TEST_CASE("models --model-file lists a file's parameters under PyTorch's names", "[cli][model_file]") {
  const CliResult r = run_cli("models --model-file " + kExamples + "small-resnet.json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("block2.shortcut.0.weight") != std::string::npos);
  CHECK(r.output.find("19578 parameters") != std::string::npos);
  const std::string python = python_with_torch();
  if (python.empty()) return;
  const CliResult py = run_shell(python + " " + NNLAB_TEST_DIR + "/../scripts/torch_model.py " + kExamples +
                                 "small-resnet.json");
  INFO(py.output);
  REQUIRE(py.exit_code == 0);
  CHECK(py.output.find("block2.shortcut.0.weight") != std::string::npos);
  CHECK(py.output.find("19578 parameters") != std::string::npos);
}
