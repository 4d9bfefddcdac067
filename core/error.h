// The one error type. A message names the operation, the shapes or values involved and,
// where the user can do something about it, what to do.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace nnlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from any streamable pieces: fail("matmul: ", a, " vs ", b).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw Error(os.str());
}

}  // namespace nnlab

#define NNLAB_CHECK(cond, ...)              \
  do {                                      \
    if (!(cond)) ::nnlab::fail(__VA_ARGS__); \
  } while (0)
