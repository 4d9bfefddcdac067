// Shared by the libFuzzer targets: nnlab's readers take paths, so each input is written to a
// file in a private temporary folder (on /dev/shm when it exists, to spare the disk) and read
// back through the real entry point. Only nnlab::Error may escape a reader: any other
// exception, a crash or a sanitizer report is a bug.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace nnlab_fuzz {

// A folder of this process's own, created on first use.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string d = base + "/nnlab-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) std::abort();  // the harness itself failed; not a finding about nnlab
}

// Runs `read`; an nnlab::Error is the expected refusal of a bad file, anything else aborts so
// that libFuzzer records the input.
template <class F>
void expect_value_or_error(F&& read) {
  try {
    read();
  } catch (const nnlab::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "non-nnlab exception escaped the reader: %s\n", e.what());
    std::abort();
  }
}

}  // namespace nnlab_fuzz
