#include "core/serialization.h"

#include "core/json_nesting.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace nnlab {

namespace {

using Json = nlohmann::ordered_json;  // keeps the tensors in the order they were written

// A header longer than this is not one nnlab (or any sane writer) made: refuse it before
// trying to read it into memory.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int32: return "I32";
    case DType::UInt8: return "U8";
    case DType::BFloat16: return "BF16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> known[] = {
      {"F32", DType::Float32}, {"F64", DType::Float64}, {"I32", DType::Int32}, {"U8", DType::UInt8},
      {"BF16", DType::BFloat16}};
  for (const auto& [name, t] : known)
    if (s == name) {
      out = t;
      return true;
    }
  return false;
}

// ---- saving -------------------------------------------------------------------------

// Kills the process at `stage` when NNLAB_FAULT_INJECT names it (the crash-safety test hook).
void maybe_fault(const char* stage) {
  const char* want = std::getenv("NNLAB_FAULT_INJECT");
  if (want && std::strcmp(want, stage) == 0) std::raise(SIGKILL);
}

void write_all(int fd, const char* p, size_t n, const std::string& tmp) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot write ", tmp, ": ", std::strerror(errno), " (is the disk full?)");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The header JSON, padded with spaces to a multiple of 8 bytes (as the reference writer does,
// so the data section stays aligned).
std::string make_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    NNLAB_CHECK(!name.empty() && name != "__metadata__", "save_safetensors: invalid tensor name '", name, "'");
    NNLAB_CHECK(!header.contains(name), "save_safetensors: tensor name '", name, "' appears twice");
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void fsync_directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  NNLAB_CHECK(fd >= 0, "cannot open directory ", dir, " to fsync it: ", std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
}

// Writes header and data to the open file `fd`, calling the partial-write fault hook halfway.
void write_contents(int fd, const std::string& tmp, const std::string& header,
                    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  char len[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  write_all(fd, len, 8, tmp);
  write_all(fd, header.data(), header.size(), tmp);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i == tensors.size() / 2) maybe_fault("after-partial-write");
    const Tensor& t = tensors[i].second;
    const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
    write_all(fd, static_cast<const char*>(host.raw_data()), host.nbytes(), tmp);
  }
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = make_header(tensors, metadata);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  NNLAB_CHECK(fd >= 0, "cannot write checkpoint ", path, ": cannot create ", tmp, ": ", std::strerror(errno),
              " (does the directory exist and is it writable?)");
  try {
    write_contents(fd, tmp, header, tensors);
    maybe_fault("before-fsync");
    NNLAB_CHECK(::fsync(fd) == 0, "cannot fsync ", tmp, ": ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  maybe_fault("before-rename");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
  maybe_fault("after-rename");
  fsync_directory_of(path);
}

// ---- loading ------------------------------------------------------------------------

namespace {

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// One tensor's header entry, checked against the data section's size (no allocation yet).
Entry parse_entry(const std::string& path, const std::string& name, const Json& j, uint64_t data_size) {
  const std::string where = "checkpoint " + path + ": tensor '" + name + "'";
  NNLAB_CHECK(j.is_object() && j.contains("dtype") && j.contains("shape") && j.contains("data_offsets"), where,
              " lacks dtype, shape or data_offsets in the header (corrupt header)");
  Entry e{name, DType::Float32, {}, 0, 0};
  NNLAB_CHECK(j["dtype"].is_string() && parse_dtype(j["dtype"].get<std::string>(), e.dtype), where,
              " has unknown dtype ", j["dtype"].dump(), "; nnlab reads F32, F64, I32, U8 and BF16");
  NNLAB_CHECK(j["shape"].is_array(), where, " has a shape that is not a list");
  uint64_t numel = 1;
  for (const auto& d : j["shape"]) {
    NNLAB_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where, " has invalid dimension ", d.dump(),
                " (dimensions must be non-negative integers)");
    const auto dim = static_cast<uint64_t>(d.get<int64_t>());
    e.shape.push_back(static_cast<int64_t>(dim));
    // Saturate rather than overflow: anything above the data size is refused below.
    numel = (dim != 0 && numel > (data_size + 1) / dim) ? data_size + 1 : numel * dim;
  }
  const auto& off = j["data_offsets"];
  NNLAB_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
              " has invalid data_offsets ", off.dump());
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  NNLAB_CHECK(e.begin <= e.end && e.end <= data_size, where, " has data_offsets [", e.begin, ", ", e.end,
              "] out of range: the data section holds ", data_size, " bytes (file truncated or corrupt)");
  const uint64_t elt = dtype_size(e.dtype);
  NNLAB_CHECK(numel <= data_size && e.end - e.begin == numel * elt, where, " of shape ", shape_str(e.shape), " ",
              j["dtype"].get<std::string>(), " needs ", numel * elt, " bytes but data_offsets give ",
              e.end - e.begin);
  return e;
}

// Parses and validates the header; entries come back sorted by data offset.
std::vector<Entry> parse_header(const std::string& path, const std::string& text, uint64_t data_size,
                                std::map<std::string, std::string>& metadata) {
  check_json_nesting(text, "checkpoint " + path + "'s header");
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {  // a syntax error, or a number no double holds
    fail("checkpoint ", path, " has a corrupt JSON header (", e.what(), "); the file is damaged or not safetensors");
  }
  NNLAB_CHECK(header.is_object(), "checkpoint ", path, " has a corrupt header: not a JSON object");
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      NNLAB_CHECK(value.is_object(), "checkpoint ", path, ": __metadata__ is not an object (corrupt header)");
      for (const auto& [k, v] : value.items()) {
        NNLAB_CHECK(v.is_string(), "checkpoint ", path, ": metadata '", k, "' is not a string (corrupt header)");
        // Metadata values are JSON texts of their own (the model file, the configuration).
        check_json_nesting(v.get<std::string>(), "checkpoint " + path + "'s metadata '" + k + "'");
        metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, value, data_size));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    NNLAB_CHECK(entries[i].begin >= entries[i - 1].end || entries[i - 1].begin == entries[i - 1].end, "checkpoint ",
                path, ": tensors '", entries[i - 1].name, "' and '", entries[i].name,
                "' overlap in the data section (corrupt header)");
  return entries;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  struct stat st {};
  NNLAB_CHECK(::stat(path.c_str(), &st) == 0, "checkpoint ", path, " does not exist (", std::strerror(errno), ")");
  NNLAB_CHECK(S_ISREG(st.st_mode), "checkpoint ", path, " is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  std::ifstream in(path, std::ios::binary);
  NNLAB_CHECK(in, "cannot open checkpoint ", path, ": ", std::strerror(errno));
  NNLAB_CHECK(size >= 8, "checkpoint ", path, " is truncated: ", size,
              " bytes, shorter than the 8-byte header length of a safetensors file");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  NNLAB_CHECK(n <= kMaxHeaderBytes, "checkpoint ", path, " claims a header of ", n,
              " bytes (more than 100 MB): the file is corrupt or not safetensors");
  NNLAB_CHECK(n <= size - 8, "checkpoint ", path, " is truncated: its header length ", n,
              " extends beyond the end of the file (", size, " bytes)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  NNLAB_CHECK(in, "cannot read the header of checkpoint ", path);
  SafetensorsFile file;
  const uint64_t data_size = size - 8 - n;
  const std::vector<Entry> entries = parse_header(path, text, data_size, file.metadata);
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    in.seekg(static_cast<std::streamoff>(8 + n + e.begin));
    in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    NNLAB_CHECK(in, "cannot read tensor '", e.name, "' of checkpoint ", path, " (file truncated?)");
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  fail("the checkpoint has no tensor '", name, "'");
}

bool SafetensorsFile::contains(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return true;
  return false;
}

}  // namespace nnlab
