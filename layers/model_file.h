// Model files: a network described as data (JSON), in the spirit of Caffe's prototxt and
// Keras's model JSON. docs/models.md documents every field; in short
//
//   {"name": "tiny", "summary": "...", "recipe": {"optimizer": "adam", "lr": 0.001},
//    "layers": [{"type": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
//               {"type": "relu"}, {"type": "flatten"},
//               {"type": "linear", "out_features": "classes"}]}
//
// The input shape and the class count come from the data set, so a file names only what it
// chooses (out_channels, kernel, ...) and every other shape is inferred layer by layer when
// the network is built for an input (build_model), with a message naming the file, the layer
// and the shapes when one does not fit. Layers are named as PyTorch's nn.Sequential names
// them: by "name" where given, else by their position ("0", "1", ...), so the parameters read
// "c1.weight", "layer2.0.downsample.0.weight", as in the twin that scripts/torch_model.py
// builds from the same file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "layers/sequential.h"

namespace nnlab {

// What the network is built for: one image's shape and the number of classes.
struct InputSpec {
  int64_t channels = 1, height = 28, width = 28, classes = 10;
};

// The default training set-up a file recommends; command-line options override each field.
struct ModelRecipe {
  std::string optimizer = "sgd";  // "sgd" | "adam" | "adamw"
  double lr = 0.01;
  double momentum = 0.0;          // SGD only
  int64_t batch = 64;
  int64_t epochs = 0;             // 0: none recommended (train's default)
  std::string schedule = "none";  // a --schedule name
  std::string data = "fashion-mnist";  // the data set it is meant for
};

struct ModelFile {
  std::string name;     // the file's "name", else its file name without ".json"
  std::string summary;  // one line for `nnlab models` ("" when the file has none)
  ModelRecipe recipe;
  std::string text;     // the file exactly as read: checkpoints carry it, `models --show` prints it
  std::string origin;   // where it came from, for messages: "model file nets/tiny.json"
};

// Reads and checks `path`: JSON syntax (line and column), the top-level fields and the recipe.
// The layers are checked by check_model / build_model, which need the input.
ModelFile read_model_file(const std::string& path);
// The same for text already in memory; `origin` ("model file X") starts every message.
ModelFile parse_model_file(const std::string& text, const std::string& origin, const std::string& default_name);

// Reads every layer's fields and infers every layer's input and output shape for `input`;
// throws one message naming the file, the layer and the shapes at the first that does not fit
// (or whose parameters, or the layers' outputs for a batch of `batch` images, could not fit in
// this machine's memory). Allocates nothing.
void check_model(const ModelFile& file, const InputSpec& input, int64_t batch = 1);

// check_model (so a network that cannot fit is refused before anything is allocated), then the
// network built. Parameters are left at zero; make_model initialises them.
std::shared_ptr<Sequential> build_model(const ModelFile& file, const InputSpec& input);

// build_model, then the weights drawn from `seed` and the Dropout layers seeded with it.
std::shared_ptr<Sequential> make_model(const ModelFile& file, const InputSpec& input, uint64_t seed);

// The same network with every hidden width (each linear's out_features and each conv2d's
// out_channels, but not the classifier's "classes") multiplied by `factor`, rounded, at least 1.
ModelFile scale_widths(const ModelFile& file, double factor);

}  // namespace nnlab
