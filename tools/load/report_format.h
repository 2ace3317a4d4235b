// How `kvfleet load` prints a LoadReport: a human table with one row per
// concurrency level, or one JSON object per level for scripts.
//
// Latencies print in milliseconds; a summary of no samples prints "-" in the
// table and null in JSON. Percentiles are LatencyStats' nearest-rank ones.
// Thread-safety: pure functions.
//
//   std::cout << FormatTableHeader() << FormatTableRow(report);
//   std::cout << FormatJson(report) << "\n";
#pragma once

#include <string>

#include "tools/load/load_runner.h"

namespace kvfleet::load {

// Column names and units, ending in a newline.
std::string FormatTableHeader();
// One line matching FormatTableHeader's columns, ending in a newline.
std::string FormatTableRow(const LoadReport& report);
// One JSON object on one line, without a newline:
//   {"concurrency":8,"requests":32,"completed":32,"failed":0,"errors":{},
//    "wall_seconds":..,"requests_per_second":..,"output_tokens_per_second":..,
//    "prompt_tokens":..,"cached_prompt_tokens":..,"generated_tokens":..,
//    "ttft_ms":{"count":..,"mean":..,"min":..,"p50":..,"p90":..,"p99":..,"max":..},
//    "itl_ms":{...},"e2e_ms":{...}}
std::string FormatJson(const LoadReport& report);

}  // namespace kvfleet::load
