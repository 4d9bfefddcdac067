#include "datasets/idx.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace nnlab {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

const char* idx_type_name(int code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
  }
}

// Reads up to n bytes; returns how many arrived. Corrupt gzip data is an error, the end of
// the file is not (the caller compares what arrived with what the header claimed).
size_t read_some(gzFile file, const std::string& path, void* dst, size_t n) {
  const int got = gzread(file, dst, static_cast<unsigned>(n));
  if (got < 0) {
    int errnum = 0;
    const char* msg = gzerror(file, &errnum);
    fail("IDX file ", path, ": corrupt gzip data (zlib: ", msg, "); delete the file and download it again");
  }
  return static_cast<size_t>(got);
}

std::string hex_byte(int b) {
  const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[(b >> 4) & 15] + digits[b & 15];
}

// Parses magic and extents; returns the number of data bytes the header claims.
int64_t read_header(gzFile file, const std::string& path, std::vector<int64_t>& dims) {
  uint8_t magic[4];
  if (read_some(file, path, magic, 4) != 4)
    fail("IDX file ", path, " is truncated: shorter than its 4-byte header; download it again");
  if (magic[0] != 0 || magic[1] != 0)
    fail("IDX file ", path, " has a wrong magic number (first bytes ", hex_byte(magic[0]), " ", hex_byte(magic[1]),
         ", expected 0x00 0x00): not an IDX file, or a compressed file that is not gzip");
  if (magic[2] != 0x08)
    fail("IDX file ", path, " holds elements of type code ", hex_byte(magic[2]), " (", idx_type_name(magic[2]),
         "); only 0x08 (unsigned byte), as in MNIST and Fashion-MNIST, is supported");
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4)
    fail("IDX file ", path, " claims ", ndims, " dimensions; an image or label file has 1 to 4");
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    uint8_t b[4];
    if (read_some(file, path, b, 4) != 4)
      fail("IDX file ", path, " is truncated inside its header (", ndims, " dimensions announced)");
    const int64_t extent = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
    dims.push_back(extent);
    // Each extent is below 2^32 and total stays below 2^31, so this product cannot overflow.
    total *= extent;
    if (total > kIdxMaxBytes)
      fail("IDX file ", path, " is corrupt: its header claims more than ", kIdxMaxBytes,
           " bytes of data (dimension ", i, " = ", extent, "); download it again");
  }
  return total;
}

}  // namespace

IdxArray read_idx_file(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) fail("cannot open IDX file ", path, ": check that it exists and is readable");
  IdxArray out;
  out.path = path;
  const int64_t claimed = read_header(file.get(), path, out.dims);
  const auto want = static_cast<size_t>(claimed);
  const size_t header_bytes = 4 + 4 * out.dims.size();
  size_t have = 0;

  // A plain file (not gzip) whose size matches the claim: the bytes go straight into their
  // tensor, each page touched once (a data set's block sits on huge pages, see
  // core/host_memory.cpp). Otherwise the claim is unproven, and the bytes arrive in a buffer
  // that grows with them, never ahead: vector growth keeps its capacity within twice what
  // actually arrived, whatever the header claimed; they are copied over once all are in.
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  if (gzdirect(file.get()) && !ec && file_bytes == header_bytes + want) {
    out.data = Tensor::empty({claimed}, DType::UInt8);
    have = read_some(file.get(), path, out.data.data<uint8_t>(), want);
  } else {
    constexpr size_t kChunk = size_t{1} << 20;
    std::vector<uint8_t> arrived;
    while (have < want) {
      const size_t n = std::min(kChunk, want - have);
      arrived.resize(have + n);
      const size_t got = read_some(file.get(), path, arrived.data() + have, n);
      have += got;
      if (got < n) break;
    }
    if (have == want) {
      out.data = Tensor::empty({claimed}, DType::UInt8);
      std::copy(arrived.begin(), arrived.end(), out.data.data<uint8_t>());
    }
  }
  if (have < want)
    fail("IDX file ", path, " is truncated: its header claims ", want, " bytes of data (dimensions ", shape_str(out.dims),
         ") but only ", have, " are present; download it again");
  uint8_t extra;
  if (read_some(file.get(), path, &extra, 1) != 0)
    fail("IDX file ", path, " is inconsistent: it holds more data than the ", want,
         " bytes its header claims; the file is corrupt or not what its name says");
  return out;
}

IdxArray read_idx(const std::string& stem) {
  namespace fs = std::filesystem;
  const std::string gz = stem + ".gz";
  std::error_code ec;
  if (fs::is_regular_file(gz, ec)) return read_idx_file(gz);
  if (fs::is_regular_file(stem, ec)) return read_idx_file(stem);
  fail("IDX file not found: neither ", gz, " nor ", stem,
       " exists; point --data-dir at the folder holding the data set's files");
}

}  // namespace nnlab
