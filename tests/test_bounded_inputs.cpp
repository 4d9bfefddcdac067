// Inputs that are well-formed but absurd, each refused with one message before it can crash
// the program (they used to end in a segmentation fault with no message): a thread count
// GNU OpenMP cannot create, JSON nested deeper than any stack walks, models with more layers
// or deeper lists than nnlab builds; and a batch whose layer outputs cannot fit in memory.
// docs/reliability.md lists each with its message.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <string>

#include "cli_support.h"
#include "core/json_nesting.h"
#include "core/serialization.h"
#include "layers/model_file.h"

using namespace nnlab_test;

namespace {

std::string nested_lists(int depth) {
  std::string inner = "{\"type\":\"flatten\"}";
  for (int i = 0; i < depth; ++i) inner = "{\"type\":\"sequential\",\"layers\":[" + inner + "]}";
  return "{\"name\":\"lists\",\"layers\":[" + inner + ",{\"type\":\"linear\",\"out_features\":\"classes\"}]}";
}

}  // namespace

TEST_CASE("bounds: JSON nesting is measured outside strings", "[bounds]") {
  CHECK(nnlab::json_nesting("{}") == 1);
  CHECK(nnlab::json_nesting("{\"a\":[[1],{\"b\":[]}]}") == 4);
  CHECK(nnlab::json_nesting("{\"a\":\"[[[[\\\"[[[\"}") == 1);
  CHECK(nnlab::json_nesting("]]]{") == 1);
  CHECK(nnlab::json_nesting(std::string(100000, '[')) == 100000);
}

TEST_CASE("bounds: model files nested or sized past nnlab's limits are refused", "[bounds]") {
  const nnlab::InputSpec mnist{1, 28, 28, 10};
  const std::string deep = "{\"name\":\"x\",\"layers\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK_THROWS_WITH(nnlab::parse_model_file(deep, "model file deep.json", "deep"),
                    Catch::Contains("model file deep.json nests its JSON 100001 levels deep; nnlab reads at most 64"));
  // 16 nested lists build; 17 are refused (the JSON itself is only 36 levels deep).
  CHECK_NOTHROW(nnlab::check_model(nnlab::parse_model_file(nested_lists(15), "m", "m"), mnist));
  CHECK_THROWS_WITH(nnlab::check_model(nnlab::parse_model_file(nested_lists(16), "m", "m"), mnist),
                    Catch::Contains("lies 17 lists deep; nnlab builds at most 16 nested sequential/residual lists"));
  std::string many = "{\"name\":\"many\",\"layers\":[";
  for (int i = 0; i < 10000; ++i) many += "{\"type\":\"relu\"},";
  many += "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out_features\":\"classes\"}]}";
  CHECK_THROWS_WITH(nnlab::check_model(nnlab::parse_model_file(many, "m", "m"), mnist),
                    Catch::Contains("layer '10000' is layer number 10001; nnlab builds models of at most 10000 layers"));
}

TEST_CASE("bounds: a number no double holds is a JSON error naming the file", "[bounds]") {
  // Found by fuzz_model_file: nlohmann throws out_of_range (not parse_error) for 1e999, which
  // escaped the reader as "[json.exception.out_of_range.406] …" with no file named.
  const std::string text = "{\"layers\":[{\"type\":\"dropout\",\"p\":44.4e440}]}";
  CHECK_THROWS_WITH(nnlab::parse_model_file(text, "model file big.json", "big"),
                    Catch::Equals("model file big.json is not valid JSON: number overflow parsing '44.4e440'"));
  TempDir dir("nnlab_bounds");
  std::ofstream(dir / "run.jsonl") << "{\"type\":\"run\",\"x\":1e999}\n";
  const CliResult r = run_cli("report " + (dir / "run.jsonl") + " -o " + (dir / "r.html"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("line 1 is not JSON nnlab can read") && Catch::Contains("number overflow"));
}

TEST_CASE("bounds: deep JSON in a checkpoint header or a run record is refused", "[bounds]") {
  TempDir dir("nnlab_bounds");
  // safetensors: 8-byte little-endian header length, then the JSON header.
  const std::string header = std::string(1000, '[') + std::string(1000, ']');
  std::ofstream out(dir / "deep.safetensors", std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out.close();
  CHECK_THROWS_WITH(nnlab::load_safetensors(dir / "deep.safetensors"),
                    Catch::Contains("deep.safetensors's header nests its JSON 1000 levels deep"));
  std::ofstream(dir / "run.jsonl") << "{\"type\":\"run\",\"x\":" << std::string(5000, '[') << std::string(5000, ']')
                                   << "}\n";
  const CliResult r = run_cli("report " + (dir / "run.jsonl") + " -o " + (dir / "r.html"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("line 1 nests its JSON 5001 levels deep"));
}

TEST_CASE("bounds: a thread count past what OpenMP can create is refused", "[bounds]") {
  const CliResult train = run_cli("train --model mlp --data synthetic-cifar10 --max-steps 1 --threads 65536");
  CHECK(train.exit_code == 1);
  CHECK_THAT(train.output, Catch::Contains("--threads 65536 is more than nnlab runs (at most"));
  const CliResult cmp = run_cli("compare --model mlp --devices cpu:threads=1,cpu:threads=99999 --max-steps 1");
  CHECK(cmp.exit_code == 1);
  CHECK_THAT(cmp.output, Catch::Contains("99999 is more than nnlab runs"));
}

TEST_CASE("bounds: a momentum of 1 or more and crops that can miss the image are refused", "[bounds]") {
  const CliResult momentum = run_cli("train --model mlp --data synthetic-cifar10 --max-steps 1 --momentum 1e300");
  CHECK(momentum.exit_code == 1);
  CHECK_THAT(momentum.output, Catch::Contains("--momentum must lie in [0, 1), got 1e+300"));
  const CliResult crop = run_cli("train --model mlp --data synthetic-cifar10 --max-steps 1 --crop-padding 1000000");
  CHECK(crop.exit_code == 1);
  CHECK_THAT(crop.output, Catch::Contains("--crop-padding 1000000 is wider than the images (32×32)"));
  const CliResult fine = run_cli("train --model mlp --data synthetic-cifar10 --max-steps 1 --epochs 1 "
                                 "--test-images 10 --crop-padding 32 --momentum 0.99");
  CHECK(fine.exit_code == 0);
}

TEST_CASE("bounds: a batch whose layer outputs cannot fit in memory is refused before training", "[bounds]") {
  // cnn on 3×32×32 images keeps 449 KiB of layer outputs an image: a billion need 428 TiB.
  const CliResult r = run_cli("train --model cnn --data synthetic-cifar10 --batch 1000000000 --max-steps 1");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("a batch of 1000000000 images needs at least") &&
                           Catch::Contains("(449 KiB an image)") && Catch::Contains("use a smaller --batch"));
}
