// Invariant checks. A broken invariant is a bug, not an input error: it
// aborts with the failing expression and location. Input errors are
// absl::Status values instead (see status_macros.h).
//
//   CHECK(block < num_blocks) << "block " << block;
//   DCHECK_EQ(a.size(), b.size());
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace kvfleet::internal {

// Collects a message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* expr) {
    stream_ << file << ":" << line << ": CHECK failed: " << expr << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << ...` compile to nothing when x holds.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace kvfleet::internal

#define CHECK(cond)                            \
  (cond) ? (void)0                             \
         : ::kvfleet::internal::Voidify() &    \
               ::kvfleet::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))

#ifdef NDEBUG
#define DCHECK(cond) \
  while (false) CHECK(cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
#define DCHECK_EQ(a, b) DCHECK((a) == (b))
#define DCHECK_LT(a, b) DCHECK((a) < (b))
#define DCHECK_LE(a, b) DCHECK((a) <= (b))
