#include "core/json_nesting.h"

#include <algorithm>

#include "core/error.h"

namespace nnlab {

int json_nesting(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void check_json_nesting(const std::string& text, const std::string& origin) {
  const int depth = json_nesting(text);
  NNLAB_CHECK(depth <= kMaxJsonNesting, origin, " nests its JSON ", depth, " levels deep; nnlab reads at most ",
              kMaxJsonNesting, " (a model file needs fewer than 20): the file is corrupt or not what it claims to be");
}

}  // namespace nnlab
