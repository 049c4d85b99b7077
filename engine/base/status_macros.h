// Status propagation macros (Debian 12's Abseil 20220623 has none), and the
// always-on invariant check for our own bugs. Bad input never reaches
// DLLM_CHECK: it returns an absl::Status.
#ifndef DLLM_ENGINE_BASE_STATUS_MACROS_H_
#define DLLM_ENGINE_BASE_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DLLM_STATUS_CONCAT_INNER(a, b) a##b
#define DLLM_STATUS_CONCAT(a, b) DLLM_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define DLLM_RETURN_IF_ERROR(expr)                                \
  do {                                                            \
    if (absl::Status dllm_status_ = (expr); !dllm_status_.ok()) { \
      return dllm_status_;                                        \
    }                                                             \
  } while (0)

// `DLLM_ASSIGN_OR_RETURN(auto x, F());` declares `x` from an OK StatusOr, or
// returns its status.
#define DLLM_ASSIGN_OR_RETURN(lhs, expr) \
  DLLM_ASSIGN_OR_RETURN_IMPL(DLLM_STATUS_CONCAT(dllm_statusor_, __LINE__), lhs, expr)
#define DLLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)

// Aborts with a message when an invariant of our own code is broken.
#define DLLM_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: DLLM_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#ifdef NDEBUG
#define DLLM_DCHECK(cond) \
  do {                    \
  } while (0)
#else
#define DLLM_DCHECK(cond) DLLM_CHECK(cond)
#endif

#endif  // DLLM_ENGINE_BASE_STATUS_MACROS_H_
