// safetensors files (https://github.com/huggingface/safetensors), the format of nnlab's
// checkpoints, readable by PyTorch's `safetensors` package:
//
//   8 bytes      N, the header length, unsigned little-endian
//   N bytes      JSON: {"fc1.weight": {"dtype": "F32", "shape": [256, 784],
//                                       "data_offsets": [begin, end]}, ...,
//                       "__metadata__": {"key": "value", ...}}   (string values only)
//   the rest     the tensors' raw little-endian bytes, packed in header order; offsets are
//                relative to the start of this data section
//
// nnlab writes and reads the dtypes F32, F64, I32, U8 and BF16 (a checkpoint's BF16 tensors
// load into a float32 model: apps/checkpoint.cpp casts each to the parameter's dtype).
//
// Saving is atomic: the bytes go to "<path>.tmp-<pid>" in the same directory, which is
// fsynced and renamed over `path`, then the directory is fsynced. A crash at any moment
// leaves either the old file or the new one at `path`, never a half-written one.
//
// Loading validates the whole header against the file before allocating anything, and
// every failure is an nnlab::Error naming the file and what is wrong with it.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace nnlab {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order, on the CPU
  std::map<std::string, std::string> metadata;
  // The tensor called `name`; throws an Error naming it when the file has none.
  const Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const;
};

// Tensors may live on any device (they are copied to the host to be written). Names must be
// unique, non-empty and not "__metadata__". Throws an Error naming the path when the file
// cannot be written; a failed save removes its temporary file and leaves `path` untouched.
//
// Test hook (crash-safety tests only): when the environment variable NNLAB_FAULT_INJECT is
// one of the stages below, the process kills itself with SIGKILL at that stage of the save:
//   after-partial-write   the temporary file holds the header and half of the data
//   before-fsync          the temporary file is fully written but not yet fsynced
//   before-rename         fsynced, not yet renamed over `path`
//   after-rename          renamed, the directory not yet fsynced
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata);

// Reads the whole file; tensors land on the CPU.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace nnlab
