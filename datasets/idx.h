// The IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/):
//
//   byte 0, 1   zero
//   byte 2      element type: 0x08 unsigned byte (the only one these data sets use)
//   byte 3      number of dimensions d
//   d × uint32  big-endian extents, outermost first
//   data        product(extents) elements, row-major
//
// Files are read through zlib, which reads gzip-compressed and plain files alike. A header
// is only a claim: the reader allocates what it says up front only when a plain file's size
// proves it; otherwise it grows its buffer as bytes actually arrive, so a corrupt or hostile
// header cannot exhaust memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

struct IdxArray {
  std::string path;            // the file actually read
  std::vector<int64_t> dims;   // extents, outermost first
  Tensor data;                 // product(dims) bytes: uint8, one dimension, on the host
};

// Largest payload accepted, 2^31 − 1 bytes: the biggest official file (60000 × 28 × 28) is 47 MB.
constexpr int64_t kIdxMaxBytes = (int64_t{1} << 31) - 1;

// Reads one IDX file from a path (gzip or raw). Throws nnlab::Error naming the file and
// what is wrong: bad magic, an element type other than unsigned byte, 0 or more than 4
// dimensions, a size claim over kIdxMaxBytes, truncated data, or trailing bytes.
IdxArray read_idx_file(const std::string& path);

// Reads `<stem>.gz` if it exists, else `<stem>`; throws naming both when neither does.
IdxArray read_idx(const std::string& stem);

}  // namespace nnlab
