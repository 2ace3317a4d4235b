// A model's fingerprint: SHA-256 over every tensor's name, type, shape and
// bytes, in name order, as lowercase hex. It names exactly the weights a
// model computes with, whatever file format holds them (a GGUF, a Hugging
// Face directory) and whatever the file's metadata says, so files trained
// against one model (draft heads) can refuse any other. Computing it reads
// every weight once: about a second per GB.
//
// So it is remembered: CachedModelFingerprint keeps one small record per
// model in a cache directory, keyed by each weight file's absolute path,
// size and modification time. A start whose files have not changed reads
// the record instead of the weights. A record that does not match is
// ignored; one that cannot be written only costs the time next start.
// (A file rewritten in place with the same size and modification time
// would keep its old fingerprint: tools that write models change both.)
//
// Thread-safety: pure functions; concurrent writers of one record each
// write a whole file and rename it into place.
//
//   std::string hex = CachedModelFingerprint(model, DefaultCacheDir());
#pragma once

#include <string>

#include "model/model.h"

namespace kvfleet::model {

// Reads every weight.
std::string ModelFingerprint(const Model& model);

// ModelFingerprint, from `cache_dir`/fingerprints when a record there
// matches the model's weight files, else computed and recorded there. An
// empty `cache_dir` computes it every time.
std::string CachedModelFingerprint(const Model& model, const std::string& cache_dir);

}  // namespace kvfleet::model
