// From a model file's "layers" to a network: each entry's fields read, its output shape
// inferred from its input's, checked, and (when building) its module made. One walk serves
// both check_model (nothing allocated) and build_model, so a network is always checked by the
// same rules it is built by.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/model_file.h"
#include "layers/pool.h"
#include "layers/residual.h"

namespace nnlab {

namespace {

using Json = nlohmann::json;
using Dims = std::vector<int64_t>;  // one image: {channels, height, width}, or {features} once flat

constexpr int64_t kMaxField = int64_t(1) << 31;  // no size field may exceed this
// Bounds on a model's structure, far above any real small network (the zoo's deepest,
// resnet8, has 26 layers, lists 3 deep); beyond them the walks below would take minutes or
// run out of stack before saying anything.
constexpr int64_t kMaxLayers = 10000;
constexpr int kMaxListNesting = 16;
const char* const kTypes =
    "linear, conv2d, maxpool2d, avgpool2d, global_avg_pool, batchnorm2d, dropout, flatten, relu, sigmoid, tanh, "
    "sequential, residual";

std::string dims_str(const Dims& d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "×") + std::to_string(v);
  return d.size() == 1 ? s + " features" : s;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 1e15;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Bytes in the unit that reads best: KiB, MiB or GiB.
std::string size_str(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return gib(bytes);
  char buf[32];
  const bool mib = bytes >= 1024.0 * 1024.0;
  std::snprintf(buf, sizeof buf, "%.3g %s", bytes / (mib ? 1024.0 * 1024.0 : 1024.0), mib ? "MiB" : "KiB");
  return buf;
}

std::string count_str(double count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", count);
  return buf;
}

struct Walk {
  const ModelFile& file;
  const InputSpec& input;
  bool build;               // false: read, infer and check only
  double parameters = 0;    // so far, in double: a file may ask for more than int64 holds
  int64_t batch = 1;        // images a step holds at once (check_model's batch)
  double activations = 0;   // elements of every layer's output per image, summed
  int64_t layers = 0;       // layers read so far, nested ones included
  int nesting = 0;          // lists (sequential, residual) open around the one being read
  double memory = physical_memory_bytes();
};

// One entry of a "layers" list while it is being read; every message names the file and it.
class Entry {
 public:
  Entry(Walk& w, const Json& j, std::string path, std::string type)
      : w_(w), j_(j), path_(std::move(path)), type_(std::move(type)) {}

  template <typename... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail(w_.file.origin, ": layer '", path_, "' (", type_, "): ", parts...);
  }

  // Only these fields (and name, type, comment) may appear: a misspelt field is an error,
  // never a silently used default.
  void allow(std::initializer_list<const char*> fields) const {
    for (const auto& item : j_.items()) {
      bool ok = item.key() == "name" || item.key() == "type" || item.key() == "comment";
      std::string list;
      for (const char* f : fields) {
        ok = ok || item.key() == f;
        list += std::string(list.empty() ? "" : ", ") + f;
      }
      if (!ok) error("unknown field '", item.key(), "'", list.empty() ? "; this layer takes no fields" : "; its fields are " + list);
    }
  }

  bool has(const char* field) const { return j_.contains(field); }
  const Json& at(const char* field) const { return j_.at(field); }

  // A whole number in [lo, 2³¹]; `fallback` < lo means the field is required.
  int64_t whole(const char* field, int64_t lo, int64_t fallback) const {
    if (!has(field)) {
      if (fallback < lo) error("needs the field '", field, "' (a whole number >= ", lo, ")");
      return fallback;
    }
    const Json& v = j_.at(field);
    if (!v.is_number_integer()) error("'", field, "' must be a whole number, got ", v.dump());
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMaxField) : v.get<int64_t>() > kMaxField)
      error("'", field, "' is ", v.dump(), ", more than the largest size nnlab accepts (", kMaxField, ")");
    if (v.get<int64_t>() < lo) error("'", field, "' must be >= ", lo, ", got ", v.dump());
    return v.get<int64_t>();
  }

  double number(const char* field, double lo, double hi, bool hi_open, double fallback) const {
    if (!has(field)) return fallback;
    const Json& v = j_.at(field);
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    if (!(x >= lo && (hi_open ? x < hi : x <= hi)))
      error("'", field, "' must be a number in [", lo, ", ", hi, hi_open ? ")" : "]", ", got ", v.dump());
    return x;
  }

  bool flag(const char* field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!j_.at(field).is_boolean()) error("'", field, "' must be true or false, got ", j_.at(field).dump());
    return j_.at(field).get<bool>();
  }

  std::string word(const char* field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!j_.at(field).is_string()) error("'", field, "' must be a string, got ", j_.at(field).dump());
    return j_.at(field).get<std::string>();
  }

  // The input must be feature maps (before the flatten).
  void need_maps(const Dims& in) const {
    if (in.size() != 3)
      error("needs feature maps (channels×height×width) but gets a flat input of ", dims_str(in),
            "; put it before the flatten");
  }

  // Counts the layer's parameters and refuses them when weights, gradients and up to two
  // optimizer moments (4 float32 copies) would not fit in this machine's memory.
  void add_parameters(double count) const {
    w_.parameters += count;
    if (16.0 * w_.parameters > w_.memory)
      error("would hold ", count_str(count), " parameters (", gib(4.0 * count), " as float32, the model ", gib(16.0 * w_.parameters),
            " with gradients and optimizer state), more than this machine's ", gib(w_.memory),
            " of memory; make it narrower");
  }

  const std::string& path() const { return path_; }
  Walk& walk() const { return w_; }

 private:
  Walk& w_;
  const Json& j_;
  std::string path_, type_;
};

std::vector<Sequential::Child> walk_list(Walk& w, const Json& list, const std::string& prefix, const std::string& what,
                                         Dims& shape);

std::shared_ptr<Module> make_activation(const Entry& e, const std::string& type) {
  if (type == "relu") return std::make_shared<ReLU>();
  if (type == "sigmoid") return std::make_shared<Sigmoid>();
  if (type == "tanh") return std::make_shared<Tanh>();
  e.error("'activation' must be relu, sigmoid, tanh or none, got '", type, "'");
}

// A spatial output size: ⌊(in + 2·padding − kernel) / stride⌋ + 1, once the kernel fits.
int64_t out_size(const Entry& e, int64_t in, int64_t kernel, int64_t stride, int64_t padding, const Dims& shape) {
  if (in + 2 * padding < kernel)
    e.error("its ", dims_str(shape), " input is too small for its ", kernel, "-wide window (padding ", padding,
            "); use a smaller kernel, more padding, or less pooling before it");
  return (in + 2 * padding - kernel) / stride + 1;
}

std::shared_ptr<Module> conv2d(const Entry& e, Dims& shape) {
  e.allow({"out_channels", "kernel", "stride", "padding", "bias"});
  e.need_maps(shape);
  const int64_t out = e.whole("out_channels", 1, 0);
  int64_t kh = 0, kw = 0;
  if (e.has("kernel") && e.at("kernel").is_array()) {
    const Json& k = e.at("kernel");
    if (k.size() != 2 || !k[0].is_number_integer() || !k[1].is_number_integer() || k[0].get<int64_t>() < 1 ||
        k[1].get<int64_t>() < 1 || k[0].get<int64_t>() > kMaxField || k[1].get<int64_t>() > kMaxField)
      e.error("'kernel' must be a whole number >= 1 or a pair [height, width] of them, got ", k.dump());
    kh = k[0].get<int64_t>(), kw = k[1].get<int64_t>();
  } else {
    kh = kw = e.whole("kernel", 1, 0);
  }
  const int64_t stride = e.whole("stride", 1, 1), padding = e.whole("padding", 0, 0);
  const bool bias = e.flag("bias", true);
  const Dims in = shape;
  shape = {out, out_size(e, in[1], kh, stride, padding, in), out_size(e, in[2], kw, stride, padding, in)};
  e.add_parameters(double(out) * double(in[0]) * double(kh) * double(kw) + (bias ? double(out) : 0.0));
  if (!e.walk().build) return nullptr;
  return std::make_shared<Conv2d>(Conv2dOptions{in[0], out, kh, kw, stride, padding, bias});
}

std::shared_ptr<Module> pool2d(const Entry& e, Dims& shape, bool max) {
  e.allow({"kernel", "stride", "padding"});
  e.need_maps(shape);
  const int64_t kernel = e.whole("kernel", 1, 0);
  const int64_t stride = e.whole("stride", 1, kernel), padding = e.whole("padding", 0, 0);
  if (2 * padding > kernel) e.error("'padding' ", padding, " is more than half the kernel ", kernel);
  const Dims in = shape;
  shape = {in[0], out_size(e, in[1], kernel, stride, padding, in), out_size(e, in[2], kernel, stride, padding, in)};
  if (!e.walk().build) return nullptr;
  const Pool2dOptions o{kernel, stride, padding};
  if (max) return std::make_shared<MaxPool2d>(o);
  return std::make_shared<AvgPool2d>(o);
}

std::shared_ptr<Module> linear(const Entry& e, Dims& shape) {
  e.allow({"out_features", "bias"});
  if (shape.size() != 1)
    e.error("needs a flat input (features) but gets ", dims_str(shape), " per image; put a flatten layer before it");
  int64_t out = 0;
  if (e.has("out_features") && e.at("out_features").is_string()) {
    if (e.at("out_features") != "classes")
      e.error("'out_features' must be a whole number or \"classes\", got ", e.at("out_features").dump());
    out = e.walk().input.classes;
  } else {
    out = e.whole("out_features", 1, 0);
  }
  const bool bias = e.flag("bias", true);
  const int64_t in = shape[0];
  shape = {out};
  e.add_parameters(double(in) * double(out) + (bias ? double(out) : 0.0));
  if (!e.walk().build) return nullptr;
  return std::make_shared<Linear>(LinearOptions{in, out, bias});
}

std::shared_ptr<Module> residual(const Entry& e, Dims& shape) {
  e.allow({"body", "shortcut", "shortcut_name", "activation"});
  if (!e.has("body")) e.error("needs a 'body': the list of layers of its main path");
  const std::string shortcut_name = e.word("shortcut_name", "shortcut");
  if (shortcut_name.empty() || shortcut_name.find('.') != std::string::npos)
    e.error("'shortcut_name' must be a non-empty name without '.', got '", shortcut_name, "'");
  const std::string activation = e.word("activation", "none");
  if (activation != "none") make_activation(e, activation);  // checks the name
  const Dims in = shape;
  Dims body_out = in, shortcut_out = in;
  auto body = walk_list(e.walk(), e.at("body"), e.path(), "its body", body_out);
  std::vector<Sequential::Child> shortcut;
  if (e.has("shortcut"))
    shortcut = walk_list(e.walk(), e.at("shortcut"), e.path() + "." + shortcut_name, "its shortcut", shortcut_out);
  for (const auto& item : e.at("body")) {
    if (e.has("shortcut") && item.value("name", std::string()) == shortcut_name)
      e.error("a body layer and the shortcut are both named '", shortcut_name, "'; set 'shortcut_name'");
  }
  if (body_out != shortcut_out) {
    if (!e.has("shortcut"))
      e.error("its body turns a ", dims_str(in), " input into ", dims_str(body_out),
              ", so the input cannot be added to it; give a 'shortcut' that makes ", dims_str(body_out),
              " (e.g. a 1×1 conv2d with the body's stride and out_channels, then a batchnorm2d)");
    e.error("its body makes ", dims_str(body_out), " but its shortcut makes ", dims_str(shortcut_out),
            " from the same ", dims_str(in), " input; both must give the same shape to be added");
  }
  shape = body_out;
  if (!e.walk().build) return nullptr;
  std::shared_ptr<Sequential> short_seq;
  if (!shortcut.empty()) {
    short_seq = std::make_shared<Sequential>();
    for (auto& [name, layer] : shortcut) short_seq->add(name, layer);
  }
  return std::make_shared<Residual>(std::move(body), shortcut_name, short_seq,
                                    activation == "none" ? nullptr : make_activation(e, activation));
}

std::shared_ptr<Module> walk_layer(const Entry& e, const std::string& type, Dims& shape) {
  const bool build = e.walk().build;
  if (type == "linear") return linear(e, shape);
  if (type == "conv2d") return conv2d(e, shape);
  if (type == "maxpool2d" || type == "avgpool2d") return pool2d(e, shape, type == "maxpool2d");
  if (type == "sequential") {
    e.allow({"layers"});
    if (!e.has("layers")) e.error("needs 'layers': the list of layers it runs in order");
    auto children = walk_list(e.walk(), e.at("layers"), e.path(), "its layers", shape);
    if (!build) return nullptr;
    auto seq = std::make_shared<Sequential>();
    for (auto& [name, layer] : children) seq->add(name, layer);
    return seq;
  }
  if (type == "residual") return residual(e, shape);
  if (type == "batchnorm2d") {
    e.allow({"eps", "momentum"});
    e.need_maps(shape);
    const double eps = e.number("eps", 0, 1, false, 1e-5), momentum = e.number("momentum", 0, 1, false, 0.1);
    if (eps <= 0) e.error("'eps' must be > 0");
    e.add_parameters(2.0 * double(shape[0]));
    return build ? std::make_shared<BatchNorm2d>(BatchNorm2dOptions{shape[0], eps, momentum}) : nullptr;
  }
  if (type == "dropout") {
    e.allow({"p"});
    const double p = e.number("p", 0, 1, true, 0.5);
    return build ? std::make_shared<Dropout>(p) : nullptr;
  }
  if (type == "global_avg_pool") {
    e.allow({});
    e.need_maps(shape);
    shape = {shape[0], 1, 1};
    return build ? std::make_shared<AdaptiveAvgPool2d>() : nullptr;
  }
  if (type == "flatten") {
    e.allow({});
    if (shape.size() == 3) shape = {shape[0] * shape[1] * shape[2]};  // each image's size was checked
    return build ? std::make_shared<Flatten>() : nullptr;
  }
  if (type == "relu" || type == "sigmoid" || type == "tanh") {
    e.allow({});
    return build ? make_activation(e, type) : nullptr;
  }
  fail(e.walk().file.origin, ": layer '", e.path(), "' has an unknown type '", type, "'; the types are ", kTypes);
}

// Reads a list of layers (the model's, a sequential's, a residual's body or shortcut), naming
// each as nn.Sequential would: its "name", else its position.
std::vector<Sequential::Child> walk_list(Walk& w, const Json& list, const std::string& prefix, const std::string& what,
                                         Dims& shape) {
  const std::string where = prefix.empty() ? "the model" : "layer '" + prefix + "'";
  NNLAB_CHECK(list.is_array(), w.file.origin, ": ", what, " of ", where, " must be a list of layers [{\"type\": ...}]");
  NNLAB_CHECK(!list.empty(), w.file.origin, ": ", what, " of ", where, " is empty; it needs at least one layer");
  NNLAB_CHECK(w.nesting < kMaxListNesting, w.file.origin, ": ", what, " of ", where, " lies ", w.nesting + 1,
              " lists deep; nnlab builds at most ", kMaxListNesting, " nested sequential/residual lists");
  ++w.nesting;
  std::vector<Sequential::Child> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& j = list[i];
    const std::string index_path = prefix.empty() ? "#" + std::to_string(i) : prefix + "." + std::to_string(i);
    NNLAB_CHECK(j.is_object(), w.file.origin, ": layer '", index_path, "' must be an object {\"type\": ...}, got ",
                j.dump());
    std::string name = std::to_string(i);
    if (j.contains("name")) {
      NNLAB_CHECK(j["name"].is_string() && !j["name"].get<std::string>().empty() &&
                      j["name"].get<std::string>().find('.') == std::string::npos,
                  w.file.origin, ": layer '", index_path, "': 'name' must be a non-empty string without '.', got ",
                  j["name"].dump());
      name = j["name"].get<std::string>();
    }
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    NNLAB_CHECK(++w.layers <= kMaxLayers, w.file.origin, ": layer '", path, "' is layer number ", w.layers,
                "; nnlab builds models of at most ", kMaxLayers, " layers");
    NNLAB_CHECK(names.insert(name).second, w.file.origin, ": two layers of ", where, " are named '", name,
                "'; names must differ (they name the parameters)");
    NNLAB_CHECK(j.contains("type"), w.file.origin, ": layer '", path, "' has no 'type'; the types are ", kTypes);
    NNLAB_CHECK(j["type"].is_string(), w.file.origin, ": layer '", path, "': 'type' must be a string, got ",
                j["type"].dump());
    const Entry e(w, j, path, j["type"].get<std::string>());
    auto module = walk_layer(e, j["type"].get<std::string>(), shape);
    double elements = 1;
    for (int64_t d : shape) elements *= double(d);
    w.activations += elements;
    if (4.0 * elements > w.memory)
      e.error("its output of ", dims_str(shape), " per image would take ", gib(4.0 * elements),
              " for one image, more than this machine's ", gib(w.memory), " of memory");
    out.emplace_back(name, module);
  }
  --w.nesting;
  return out;
}

std::vector<Sequential::Child> walk_model(Walk& w) {
  const Json j = Json::parse(w.file.text);
  const InputSpec& in = w.input;
  NNLAB_CHECK(in.channels > 0 && in.height > 0 && in.width > 0 && in.classes > 0, w.file.origin,
              ": the input ", in.channels, "×", in.height, "×", in.width, " with ", in.classes,
              " classes is not a valid input");
  Dims shape = {in.channels, in.height, in.width};
  auto children = walk_list(w, j.at("layers"), "", "the layers", shape);
  NNLAB_CHECK(shape == Dims{in.classes}, w.file.origin, ": the network ends in ", dims_str(shape),
              " per image, but it must end in one score per class (", in.classes,
              " for this data set); end it with a flatten and a linear layer with \"out_features\": \"classes\"");
  // A lower bound on one step's memory: every layer's float32 output, stored once (backward
  // keeps most of them; fused layers skip a few). A batch past it cannot run; below it, the
  // allocator's own out-of-memory message covers the rest.
  const double batch_bytes = 4.0 * w.activations * double(w.batch);
  NNLAB_CHECK(batch_bytes <= w.memory, w.file.origin, ": a batch of ", w.batch, " images needs at least ",
              gib(batch_bytes), " for its layers' outputs (", size_str(4.0 * w.activations), " an image), more than this ",
              "machine's ", gib(w.memory), " of memory; use a smaller --batch");
  return children;
}

}  // namespace

void check_model(const ModelFile& file, const InputSpec& input, int64_t batch) {
  Walk w{file, input, false};
  w.batch = batch;
  walk_model(w);
}

std::shared_ptr<Sequential> build_model(const ModelFile& file, const InputSpec& input) {
  check_model(file, input);  // the whole network fits before a single tensor is allocated
  Walk w{file, input, true};
  auto model = std::make_shared<Sequential>();
  for (auto& [name, layer] : walk_model(w)) model->add(name, layer);
  return model;
}

}  // namespace nnlab
