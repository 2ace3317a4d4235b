// A model's fingerprint: SHA-256 over every tensor's name, type, shape and
// bytes, in name order, as lowercase hex. It names exactly the weights a
// model computes with, whatever file format holds them (a GGUF, a Hugging
// Face directory) and whatever the file's metadata says, so files trained
// against one model (draft heads) can refuse any other. Reads every weight
// once: about a second per GB.
//
//   ASSIGN_OR_RETURN(std::string hex, ModelFingerprint(model));
#pragma once

#include <string>

#include "model/model.h"

namespace kvfleet::model {

std::string ModelFingerprint(const Model& model);

}  // namespace kvfleet::model
