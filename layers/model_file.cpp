// Reading a model file: the JSON itself, its top-level fields and the recipe. The layers are
// read by model_build.cpp, which needs the input shape to check them.
#include "layers/model_file.h"

#include <cmath>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_nesting.h"
#include "layers/dropout.h"

namespace nnlab {

namespace {

using Json = nlohmann::json;

const char* const kTopFields[] = {"name", "summary", "recipe", "layers", "comment"};
const char* const kRecipeFields[] = {"optimizer", "lr", "momentum", "batch", "epochs", "schedule", "data",
                                      "comment"};

template <typename Fields>
void reject_unknown(const Json& object, const Fields& known, const std::string& where, const std::string& origin) {
  for (const auto& item : object.items()) {
    bool ok = false;
    std::string list;
    for (const char* k : known) {
      ok = ok || item.key() == k;
      list += (list.empty() ? "" : ", ") + std::string(k);
    }
    NNLAB_CHECK(ok, origin, ": ", where, " has an unknown field '", item.key(), "'; its fields are ", list);
  }
}

// nlohmann's errors read "[json.exception.parse_error.101] parse error at line 3, column 7:
// syntax error while parsing ..." or "[json.exception.out_of_range.406] number overflow
// parsing '1e999'" (a number no double holds); the user needs the part after the tag.
std::string parse_error_text(const Json::exception& e) {
  const std::string what = e.what();
  const auto at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

ModelRecipe read_recipe(const Json& r, const std::string& origin) {
  NNLAB_CHECK(r.is_object(), origin, ": \"recipe\" must be an object such as {\"optimizer\": \"adam\", \"lr\": 0.001}");
  reject_unknown(r, kRecipeFields, "the recipe", origin);
  ModelRecipe recipe;
  auto word = [&](const char* key, std::string& out, std::initializer_list<const char*> allowed) {
    if (!r.contains(key)) return;
    NNLAB_CHECK(r[key].is_string(), origin, ": recipe field '", key, "' must be a string");
    out = r[key].get<std::string>();
    std::string list;
    bool ok = false;
    for (const char* a : allowed) {
      ok = ok || out == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    NNLAB_CHECK(ok, origin, ": recipe field '", key, "' is '", out, "'; choose one of ", list);
  };
  auto number = [&](const char* key, double& out) {
    if (!r.contains(key)) return;
    NNLAB_CHECK(r[key].is_number() && std::isfinite(r[key].get<double>()) && r[key].get<double>() >= 0, origin,
                ": recipe field '", key, "' must be a number >= 0");
    out = r[key].get<double>();
  };
  word("optimizer", recipe.optimizer, {"sgd", "adam", "adamw"});
  number("lr", recipe.lr);
  number("momentum", recipe.momentum);
  word("schedule", recipe.schedule, {"none", "step", "cosine", "warmup-cosine", "onecycle"});
  word("data", recipe.data, {"fashion-mnist", "mnist", "cifar10", "folder", "synthetic-cifar10"});
  if (r.contains("batch")) {
    NNLAB_CHECK(r["batch"].is_number_integer() && r["batch"].get<int64_t>() >= 1, origin,
                ": recipe field 'batch' must be a whole number >= 1");
    recipe.batch = r["batch"].get<int64_t>();
  }
  if (r.contains("epochs")) {  // a schedule such as onecycle is shaped by the run's length
    NNLAB_CHECK(r["epochs"].is_number_integer() && r["epochs"].get<int64_t>() >= 1 &&
                    r["epochs"].get<int64_t>() <= 100000,
                origin, ": recipe field 'epochs' must be a whole number in 1..100000");
    recipe.epochs = r["epochs"].get<int64_t>();
  }
  return recipe;
}

}  // namespace

ModelFile parse_model_file(const std::string& text, const std::string& origin, const std::string& default_name) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  NNLAB_CHECK(first != std::string::npos, origin, " is empty; a model file is a JSON object with a \"layers\" list");
  NNLAB_CHECK(text[first] == '{', origin,
              " is not a JSON model file: it does not start with '{' (a model file is a JSON object with a "
              "\"layers\" list; docs/models.md)");
  check_json_nesting(text, origin);
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(origin, " is not valid JSON: ", parse_error_text(e));
  }
  NNLAB_CHECK(j.is_object(), origin, " must hold one JSON object with a \"layers\" list");
  reject_unknown(j, kTopFields, "the model", origin);
  ModelFile file;
  file.text = text;
  file.origin = origin;
  file.name = default_name;
  if (j.contains("name")) {
    NNLAB_CHECK(j["name"].is_string() && !j["name"].get<std::string>().empty(), origin,
                ": \"name\" must be a non-empty string");
    file.name = j["name"].get<std::string>();
  }
  if (j.contains("summary")) {
    NNLAB_CHECK(j["summary"].is_string(), origin, ": \"summary\" must be a string");
    file.summary = j["summary"].get<std::string>();
  }
  if (j.contains("recipe")) file.recipe = read_recipe(j["recipe"], origin);
  NNLAB_CHECK(j.contains("layers"), origin, " has no \"layers\" list; the network is empty");
  NNLAB_CHECK(j["layers"].is_array(), origin, ": \"layers\" must be a list of layers [{\"type\": ...}, ...]");
  NNLAB_CHECK(!j["layers"].empty(), origin, ": \"layers\" is empty; a network needs at least one layer");
  return file;
}

ModelFile read_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  NNLAB_CHECK(in.good(), "cannot open model file ", path, "; check the path (nnlab models lists the zoo, and "
              "`nnlab models --show cnn` prints a file to start from)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  NNLAB_CHECK(!in.bad(), "cannot read model file ", path);
  std::string stem = path.substr(path.find_last_of('/') + 1);
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
  return parse_model_file(text, "model file " + path, stem);
}

std::shared_ptr<Sequential> make_model(const ModelFile& file, const InputSpec& input, uint64_t seed) {
  auto model = build_model(file, input);
  model->initialize(seed);
  seed_dropout(*model, seed);
  return model;
}

namespace {
void scale_layers(Json& layers, double factor) {
  for (Json& layer : layers) {
    for (const char* key : {"out_features", "out_channels"})
      if (layer.contains(key) && layer[key].is_number_integer())
        layer[key] = std::max<int64_t>(1, std::llround(layer[key].get<int64_t>() * factor));
    for (const char* key : {"layers", "body", "shortcut"})
      if (layer.contains(key) && layer[key].is_array()) scale_layers(layer[key], factor);
  }
}
}  // namespace

ModelFile scale_widths(const ModelFile& file, double factor) {
  if (factor == 1.0) return file;
  Json j = Json::parse(file.text);
  scale_layers(j["layers"], factor);
  ModelFile scaled = file;
  scaled.text = j.dump(2) + "\n";
  return scaled;
}

}  // namespace nnlab
