// Shared by the end-to-end tests of the `nnlab` program: run it, keep a scratch folder.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

namespace nnlab_test {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs the built program with `args`; returns its exit code and everything it printed.
inline CliResult run_cli(const std::string& args) {
  FILE* pipe = popen((std::string(NNLAB_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A fresh, empty folder under the system temp folder, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "nnlab_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace nnlab_test
