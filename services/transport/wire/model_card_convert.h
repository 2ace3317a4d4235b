// A model card (model/model_card.h) on the wire: the worker's
// DescribeModel answer and the router's reading of it.
//
// The card travels as one serialized ModelDescription cut into chunks (a
// 150,000-token vocabulary with its merges is about 5 MB, over gRPC's
// default message size); ModelCardReader puts the chunks back together,
// refuses more bytes than the first chunk announced (or than a cap), and
// checks the card is whole: its SHA-256 is the one announced, every token
// has a type, every special id is in the vocabulary, and the fingerprint is
// the one announced.
//
//   for (const v1::ModelDescriptionChunk& c : ChunkModelCard(card)) writer->Write(c);
//   ModelCardReader reader;
//   while (stream->Read(&chunk)) RETURN_IF_ERROR(reader.Add(chunk));
//   ASSIGN_OR_RETURN(model::ModelCard card, reader.Finish());
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvfleet/v1/worker.pb.h"
#include "model/model_card.h"

namespace kvfleet::transport {

v1::ModelDescription ToProto(const model::ModelCard& card);
// INVALID_ARGUMENT naming the field that is inconsistent.
absl::StatusOr<model::ModelCard> FromProto(const v1::ModelDescription& description);

// The card serialized and cut into chunks of at most `chunk_bytes`.
std::vector<v1::ModelDescriptionChunk> ChunkModelCard(const model::ModelCard& card, int64_t chunk_bytes = 1 << 20);

class ModelCardReader {
 public:
  // More than this is refused whatever the first chunk says: a card is a
  // vocabulary, not weights.
  static constexpr int64_t kMaxBytes = int64_t{256} << 20;

  absl::Status Add(const v1::ModelDescriptionChunk& chunk);
  // The card; INVALID_ARGUMENT when bytes are missing, do not parse or the
  // card is inconsistent; DATA_LOSS when they are not the bytes announced.
  absl::StatusOr<model::ModelCard> Finish() const;

 private:
  std::string bytes_;
  int64_t total_bytes_ = -1;  // -1: no chunk yet
  std::string fingerprint_;
  std::string digest_;
};

}  // namespace kvfleet::transport
