// The model zoo: six model files shipped with nnlab (layers/zoo/<name>.json, installed to
// <prefix>/share/nnlab/zoo), read by the same code as a user's own file (model_file.h). Each
// is identical to its twin in the PyTorch yardstick (scripts/torch_reference.py): same
// layers, same parameter names, same default training recipe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/model_file.h"

namespace nnlab {

// The zoo's files, in the order `nnlab models` lists them; read once, on first use.
const std::vector<ModelFile>& model_zoo();
const ModelFile& model_info(const std::string& name);  // throws with the list of names
std::string model_names();                             // "mlp, cnn, ..."

// The folder the zoo's files are read from, the first of
//   $NNLAB_ZOO_DIR                                 (set by the user; must hold the files)
//   <the program's folder>/../share/nnlab/zoo      (an installed nnlab, wherever it was moved)
//   <the source tree>/layers/zoo                   (a build tree: the files as checked out)
//   <the configured install prefix>/share/nnlab/zoo
// that holds mlp.json; throws, naming every place it looked, when none does.
std::string zoo_directory();

// Builds zoo model `name` for `input` and initialises it from `seed`.
std::shared_ptr<Sequential> make_model(const std::string& name, const InputSpec& input, uint64_t seed);

}  // namespace nnlab
