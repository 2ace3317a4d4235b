#include "services/worker/server/model_card_stream.h"

#include <utility>

namespace kvfleet::worker {

ModelCardStream::ModelCardStream(std::shared_ptr<const ModelCardChunks> chunks) : chunks_(std::move(chunks)) {
  WriteNext();
}

void ModelCardStream::OnWriteDone(bool ok) {
  if (!ok) {
    // The router went away mid-card; it asks again.
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader of the model description went away"));
    return;
  }
  WriteNext();
}

void ModelCardStream::WriteNext() {
  if (next_ == chunks_->size()) {
    Finish(grpc::Status::OK);
    return;
  }
  StartWrite(&(*chunks_)[next_++]);
}

}  // namespace kvfleet::worker
