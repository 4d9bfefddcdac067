// Model files (layers/model_file.h): names as PyTorch's nn.Sequential gives them, shapes
// inferred from the input, residual blocks, width scaling, and every kind of bad file ending
// in one message that names the file and the layer.
#include <fstream>

#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "core/random.h"
#include "layers/model_file.h"
#include "layers/zoo.h"
#include "model_support.h"
#include "test_support.h"

using namespace nnlab;
using nnlab_test::kMnist;
using nnlab_test::names_of;

namespace {

ModelFile from_text(const std::string& text) { return parse_model_file(text, "model file test.json", "test"); }

// The message of the error that reading and checking `text` for MNIST-shaped input throws.
std::string error_of(const std::string& text, const InputSpec& input = kMnist) {
  try {
    check_model(from_text(text), input);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string net(const std::string& layers) { return "{\"layers\": [" + layers + "]}"; }

}  // namespace

TEST_CASE("a model file's layers are named by position unless named, as nn.Sequential names them", "[model_file]") {
  const auto model = build_model(from_text(net(R"({"type": "flatten"}, {"type": "linear", "out_features": 32},
      {"name": "act", "type": "tanh"}, {"name": "head", "type": "linear", "out_features": "classes", "bias": false})")),
                                 kMnist);
  CHECK(names_of(*model) == std::vector<std::string>{"1.weight", "1.bias", "head.weight"});
  CHECK(model->named_parameters()[0].second.shape() == Shape{32, 784});
  CHECK(model->named_parameters()[2].second.shape() == Shape{10, 32});
}

TEST_CASE("model files infer conv, pool and residual shapes and name nested layers", "[model_file]") {
  const std::string text = net(R"(
    {"name": "c", "type": "conv2d", "out_channels": 8, "kernel": [3, 5], "padding": 1},
    {"name": "p", "type": "avgpool2d", "kernel": 3, "stride": 2, "padding": 1},
    {"name": "blk", "type": "residual", "activation": "relu", "shortcut_name": "proj",
     "body": [{"type": "conv2d", "out_channels": 4, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
              {"type": "batchnorm2d"}],
     "shortcut": [{"type": "conv2d", "out_channels": 4, "kernel": 1, "stride": 2}]},
    {"name": "s", "type": "sequential", "layers": [{"type": "maxpool2d", "kernel": 2}, {"type": "dropout", "p": 0.1}]},
    {"name": "g", "type": "global_avg_pool"}, {"type": "flatten"}, {"name": "fc", "type": "linear", "out_features": "classes"})");
  const auto model = make_model(from_text(text), kMnist, 1);
  // 28×28 -> conv (3×5, pad 1) 28×26 -> avgpool (3, stride 2, pad 1) 14×13 -> residual stride 2: 7×7
  // -> maxpool 3×3 -> global 1×1
  CHECK(names_of(*model) == std::vector<std::string>{"c.weight", "c.bias", "blk.0.weight", "blk.1.weight",
                                                     "blk.1.bias", "blk.proj.0.weight", "blk.proj.0.bias",
                                                     "fc.weight", "fc.bias"});
  CHECK(model->named_parameters()[0].second.shape() == Shape{8, 1, 3, 5});
  CHECK(model->named_parameters()[2].second.shape() == Shape{4, 8, 3, 3});
  CHECK(model->named_parameters()[7].second.shape() == Shape{10, 4});
  Tensor x = Tensor::empty({2, 1, 28, 28});
  uniform_fill(x, 0, 1, RandomStream{1, RandomPurpose::Init, 9});
  CHECK(model->forward(x).shape() == Shape{2, 10});
}

TEST_CASE("scale_widths multiplies every hidden width but not the classes", "[model_file]") {
  const auto wide = build_model(scale_widths(model_info("cnn"), 0.5), kMnist);
  CHECK(wide->named_parameters()[0].second.shape() == Shape{16, 1, 3, 3});
  CHECK(wide->named_parameters()[4].second.shape() == Shape{64, 32 * 7 * 7});
  CHECK(wide->named_parameters()[6].second.shape() == Shape{10, 64});
}

TEST_CASE("bad model files end in one message naming the file and the layer", "[model_file][bad_input]") {
  const std::string f = "model file test.json";
  CHECK(error_of(net(R"({"name": "c", "type": "conv3d"})")) ==
        f + ": layer 'c' has an unknown type 'conv3d'; the types are linear, conv2d, maxpool2d, avgpool2d, "
            "global_avg_pool, batchnorm2d, dropout, flatten, relu, sigmoid, tanh, sequential, residual");
  CHECK(error_of(net(R"({"name": "c1", "type": "conv2d", "kernel": 3})")) ==
        f + ": layer 'c1' (conv2d): needs the field 'out_channels' (a whole number >= 1)");
  CHECK(error_of(net(R"({"name": "c1", "type": "conv2d", "out_channels": 8, "kernel": -3})")) ==
        f + ": layer 'c1' (conv2d): 'kernel' must be >= 1, got -3");
  CHECK(error_of(net(R"({"type": "conv2d", "out_channels": 8, "kernel": 3, "padding": -1})")) ==
        f + ": layer '0' (conv2d): 'padding' must be >= 0, got -1");
  CHECK(error_of(net(R"({"name": "c1", "type": "conv2d", "out_channel": 8, "kernel": 3})")) ==
        f + ": layer 'c1' (conv2d): unknown field 'out_channel'; its fields are out_channels, kernel, stride, padding, bias");
  CHECK(error_of(net(R"({"type": "dropout", "p": 1.5})")) == f + ": layer '0' (dropout): 'p' must be a number in [0, 1), got 1.5");
  // Shapes that do not fit: which layer, and what shapes.
  CHECK(error_of(net(R"({"type": "conv2d", "out_channels": 4, "kernel": 3}, {"name": "fc", "type": "linear", "out_features": 10})")) ==
        f + ": layer 'fc' (linear): needs a flat input (features) but gets 4×26×26 per image; put a flatten layer before it");
  CHECK(error_of(net(R"({"type": "flatten"}, {"name": "c", "type": "conv2d", "out_channels": 4, "kernel": 3})")) ==
        f + ": layer 'c' (conv2d): needs feature maps (channels×height×width) but gets a flat input of 784 features; put it before the flatten");
  CHECK(error_of(net(R"({"type": "maxpool2d", "kernel": 4}, {"name": "big", "type": "conv2d", "out_channels": 4, "kernel": 9})")) ==
        f + ": layer 'big' (conv2d): its 1×7×7 input is too small for its 9-wide window (padding 0); use a smaller kernel, more padding, or less pooling before it");
  CHECK(error_of(net(R"({"name": "r", "type": "residual", "body": [{"type": "conv2d", "out_channels": 2, "kernel": 3, "stride": 2, "padding": 1}]})")) ==
        f + ": layer 'r' (residual): its body turns a 1×28×28 input into 2×14×14, so the input cannot be added to it; give a 'shortcut' that makes 2×14×14 (e.g. a 1×1 conv2d with the body's stride and out_channels, then a batchnorm2d)");
  CHECK(error_of(net(R"({"type": "flatten"}, {"type": "linear", "out_features": 7})")) ==
        f + ": the network ends in 7 features per image, but it must end in one score per class (10 for this data set); end it with a flatten and a linear layer with \"out_features\": \"classes\"");
  CHECK(error_of(net(R"({"type": "flatten"}, {"type": "relu", "name": "a"}, {"type": "relu", "name": "a"})")) ==
        f + ": two layers of the model are named 'a'; names must differ (they name the parameters)");
  // A huge layer is refused from its shapes, before anything is allocated.
  const std::string huge = error_of(net(R"({"type": "flatten"}, {"name": "wide", "type": "linear", "out_features": 1073741824})"));
  CHECK_THAT(huge, Catch::StartsWith(f + ": layer 'wide' (linear): would hold 8.43e+11 parameters (3.14e+03 GiB as float32"));
  CHECK_THAT(huge, Catch::Contains("more than this machine's"));
  CHECK(error_of(net(R"({"type": "conv2d", "out_channels": 4, "kernel": 3, "stride": 4294967296})")) ==
        f + ": layer '0' (conv2d): 'stride' is 4294967296, more than the largest size nnlab accepts (2147483648)");
  // The file itself: syntax (line and column), not JSON, empty.
  CHECK_THROWS_WITH(from_text("{\n  \"layers\": [\n    {\"type\": \"relu\",}\n  ]\n}"),
                    f + " is not valid JSON: parse error at line 3, column 21: syntax error while parsing object key - "
                        "unexpected '}'; expected string literal");
  CHECK_THROWS_WITH(from_text("\x89PNG\r\n"), Catch::StartsWith(f + " is not a JSON model file: it does not start with '{'"));
  CHECK_THROWS_WITH(from_text("  \n"), f + " is empty; a model file is a JSON object with a \"layers\" list");
  CHECK_THROWS_WITH(from_text("{\"layers\": []}"), f + ": \"layers\" is empty; a network needs at least one layer");
  CHECK_THROWS_WITH(from_text("{\"name\": \"x\"}"), f + " has no \"layers\" list; the network is empty");
  CHECK_THROWS_WITH(from_text("{\"layers\": [{\"type\": \"relu\"}], \"recipe\": {\"optimizer\": \"lbfgs\"}}"),
                    f + ": recipe field 'optimizer' is 'lbfgs'; choose one of sgd, adam, adamw");
  CHECK_THROWS_WITH(from_text("{\"layer\": []}"),
                    f + ": the model has an unknown field 'layer'; its fields are name, summary, recipe, layers, comment");
}

TEST_CASE("read_model_file names the file, and a missing one is one message", "[model_file][bad_input]") {
  nnlab_test::TempDir dir("nnlab_model_file");
  CHECK_THROWS_WITH(read_model_file(dir / "none.json"), Catch::StartsWith("cannot open model file " + (dir / "none.json")));
  std::ofstream(dir / "mine.json") << net(R"({"type": "flatten"}, {"type": "linear", "out_features": "classes"})");
  const ModelFile m = read_model_file(dir / "mine.json");
  CHECK(m.name == "mine");  // no "name": the file's name
  CHECK(m.origin == "model file " + (dir / "mine.json"));
  CHECK(m.recipe.optimizer == "sgd");
  CHECK(m.recipe.batch == 64);
  CHECK(build_model(m, kMnist)->parameter_count() == 7850);
}
