// Shapes are plain vectors of extents, outermost first (row-major, NCHW for images).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnlab {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
// "[64, 1, 28, 28]"
std::string shape_str(const Shape& s);

}  // namespace nnlab
