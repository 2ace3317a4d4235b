// Status propagation macros for absl::Status / absl::StatusOr.
//
// abseil 20220623 ships no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so the project
// owns exactly one definition of each, here.
//
//   RETURN_IF_ERROR(file.Validate());
//   ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KVFLEET_CONCAT_INNER_(a, b) a##b
#define KVFLEET_CONCAT_(a, b) KVFLEET_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status kvfleet_status_ = (expr);           \
    if (!kvfleet_status_.ok()) return kvfleet_status_; \
  } while (0)

#define KVFLEET_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  KVFLEET_ASSIGN_OR_RETURN_IMPL_(KVFLEET_CONCAT_(kvfleet_statusor_, __LINE__), lhs, expr)
