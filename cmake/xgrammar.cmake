# xgrammar's C++ core (grammar-constrained decoding: JSON schema, regex,
# EBNF and structural-tag grammars compiled against a vocabulary into
# per-step token bitmasks) as the imported static library
# xgrammar::xgrammar. It is not built here: scripts/build_xgrammar.sh
# builds it once from its PyPI source distribution into a versioned prefix
# outside the clone,
#
#   ${KVFLEET_DEPS_CACHE:-~/.cache/kvfleet/deps}/xgrammar-<version>
#
# and this file takes the version, sdist hash and recipe revision from that
# script, so the two cannot drift: a prefix without the script's completed
# stamp (missing, interrupted, or from another pin) stops the configure and
# says to run the script. -DKVFLEET_XGRAMMAR_ROOT=<prefix> points elsewhere.
#
# Include with root-relative angle brackets, as the library's own headers
# do: #include <xgrammar/xgrammar.h> (matcher.h pulls <dlpack/dlpack.h>,
# installed beside it). Imported include directories are system ones, so
# its headers' warnings stay out of kvfleet's -Wall -Wextra [-Werror].
# Built as C++17 against the same libstdc++; fine to use from C++20.
if(TARGET xgrammar::xgrammar)
  return()
endif()

set(kvfleet_xgrammar_script "${CMAKE_CURRENT_LIST_DIR}/../scripts/build_xgrammar.sh")
cmake_path(NORMAL_PATH kvfleet_xgrammar_script)
foreach(key XGRAMMAR_VERSION XGRAMMAR_SDIST_SHA256 RECIPE_REVISION)
  file(STRINGS "${kvfleet_xgrammar_script}" kvfleet_xgrammar_line REGEX "^${key}=" LIMIT_COUNT 1)
  string(REGEX REPLACE "^${key}=" "" kvfleet_xgrammar_${key} "${kvfleet_xgrammar_line}")
  if(kvfleet_xgrammar_${key} STREQUAL "")
    message(FATAL_ERROR "cmake/xgrammar.cmake: no ${key}= line in ${kvfleet_xgrammar_script}")
  endif()
endforeach()
set(KVFLEET_XGRAMMAR_VERSION ${kvfleet_xgrammar_XGRAMMAR_VERSION})

set(KVFLEET_XGRAMMAR_ROOT "" CACHE PATH
    "xgrammar install prefix (empty: the one scripts/build_xgrammar.sh uses)")
if(KVFLEET_XGRAMMAR_ROOT)
  set(kvfleet_xgrammar_root "${KVFLEET_XGRAMMAR_ROOT}")
elseif(DEFINED ENV{KVFLEET_DEPS_CACHE} AND NOT "$ENV{KVFLEET_DEPS_CACHE}" STREQUAL "")
  set(kvfleet_xgrammar_root "$ENV{KVFLEET_DEPS_CACHE}/xgrammar-${KVFLEET_XGRAMMAR_VERSION}")
else()
  set(kvfleet_xgrammar_root "$ENV{HOME}/.cache/kvfleet/deps/xgrammar-${KVFLEET_XGRAMMAR_VERSION}")
endif()

set(kvfleet_xgrammar_stamp_want
    "xgrammar ${KVFLEET_XGRAMMAR_VERSION} sdist-sha256 ${kvfleet_xgrammar_XGRAMMAR_SDIST_SHA256} recipe ${kvfleet_xgrammar_RECIPE_REVISION}")
set(kvfleet_xgrammar_stamp_have "")
if(EXISTS "${kvfleet_xgrammar_root}/.kvfleet-complete")
  file(STRINGS "${kvfleet_xgrammar_root}/.kvfleet-complete" kvfleet_xgrammar_stamp_have LIMIT_COUNT 1)
endif()
if(NOT kvfleet_xgrammar_stamp_have STREQUAL kvfleet_xgrammar_stamp_want
   OR NOT EXISTS "${kvfleet_xgrammar_root}/lib/libxgrammar.a"
   OR NOT EXISTS "${kvfleet_xgrammar_root}/include/xgrammar/xgrammar.h"
   OR NOT EXISTS "${kvfleet_xgrammar_root}/include/dlpack/dlpack.h")
  if(kvfleet_xgrammar_stamp_have STREQUAL "")
    set(kvfleet_xgrammar_why "no completed build there")
  else()
    set(kvfleet_xgrammar_why "its stamp says '${kvfleet_xgrammar_stamp_have}'")
  endif()
  message(FATAL_ERROR
    "xgrammar ${KVFLEET_XGRAMMAR_VERSION} is not built at ${kvfleet_xgrammar_root} "
    "(${kvfleet_xgrammar_why}; scripts/build_xgrammar.sh pins '${kvfleet_xgrammar_stamp_want}'). "
    "Run scripts/build_xgrammar.sh (about a minute and a half on 2 cores, once per "
    "machine and pin) with the same KVFLEET_DEPS_CACHE as this configure, then configure again.")
endif()

# A new pin in the script, or a rebuilt prefix, reconfigures.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  "${kvfleet_xgrammar_script}" "${kvfleet_xgrammar_root}/.kvfleet-complete")

find_package(Threads REQUIRED)  # its GrammarCompiler and BatchGrammarMatcher run thread pools
add_library(xgrammar::xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(xgrammar::xgrammar PROPERTIES
  IMPORTED_LOCATION "${kvfleet_xgrammar_root}/lib/libxgrammar.a"
  INTERFACE_INCLUDE_DIRECTORIES "${kvfleet_xgrammar_root}/include"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
message(STATUS "kvfleet: xgrammar ${KVFLEET_XGRAMMAR_VERSION} from ${kvfleet_xgrammar_root}")
