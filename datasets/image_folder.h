// Image folders: a labelled data set from a directory tree of PNG/JPEG/BMP files.
//
//   ROOT/<class>/*.png|jpg|jpeg|bmp         one folder per class; a seeded held-out test
//                                           split (kFolderTestFraction of every class)
//   ROOT/train/<class>/..., ROOT/test/<class>/...   when both exist: the given split
//
// Class names are the sorted sub-folder names (of ROOT/train when split); label i is the
// i-th name. Files are taken in sorted order; other files (no image extension, hidden files)
// are ignored. Every image is converted to one shape: the size of the first image (first
// class, first file) and 3 channels if any image has colour, else 1 (see image_io.h for the
// conversion). A file that cannot be read fails the whole load with an Error listing the
// first few bad files by name — nothing is skipped silently.
//
// The test split: the images are permuted by Philox (seed kFolderSplitSeed, purpose Split,
// stream 1 — independent of the training seed, so every run tests on the same images);
// round(kFolderTestFraction · n) of them, at least 1, form the test set.
#pragma once
#include <cstdint>
#include <string>

#include "datasets/dataset.h"

namespace nnlab {

constexpr double kFolderTestFraction = 0.2;
constexpr uint64_t kFolderSplitSeed = 0;

// split: "train" | "test".
Dataset load_image_folder(const std::string& root, const std::string& split);

}  // namespace nnlab
