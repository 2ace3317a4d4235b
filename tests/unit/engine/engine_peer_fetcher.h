// A KvPeerFetcher that pulls from another engine in the same process, as the
// worker's KvTransfer client pulls from a peer's port: ExportKvBlocks on the
// peer (stepped once to answer), then `fault`, if set, on what came back.
// Tests of peer prefix fetch use it to compare a pulled prefix with one
// computed in place, without a network.
//
//   EngineFetcher fetcher(peer_engine);
//   EngineOptions options{..., .kv_peer_fetcher = &fetcher};
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/kv/transfer/kv_peer_fetcher.h"

namespace kvfleet::testing {

class EngineFetcher final : public engine::KvPeerFetcher {
 public:
  explicit EngineFetcher(engine::Engine& peer) : peer_(peer) {}
  std::function<void(std::vector<engine::KvBlockBytes>&, absl::Status&)> fault;
  std::vector<std::string> endpoints;
  std::vector<size_t> asked;
  std::vector<std::string> leases;
  std::vector<std::string> renewals;
  std::vector<std::string> adapters;  // each pull's, as its handshake names it

  void Fetch(const std::string& endpoint, const std::string& adapter, std::vector<BlockHash> hashes,
             const std::string& lease_id, Done done) override {
    endpoints.push_back(endpoint);
    adapters.push_back(adapter);
    asked.push_back(hashes.size());
    leases.push_back(lease_id);
    std::vector<engine::KvBlockBytes> got;
    peer_.ExportKvBlocks(
        std::move(hashes), [&](std::vector<engine::KvBlockBytes> b) { got = std::move(b); }, lease_id);
    EXPECT_TRUE(peer_.Step().ok());
    absl::Status status;
    if (fault) fault(got, status);
    done(std::move(got), status);
  }

  void RenewLease(const std::string&, const std::string& lease_id) override {
    renewals.push_back(lease_id);
    peer_.RenewKvLease(lease_id);
    EXPECT_TRUE(peer_.Step().ok());
  }

 private:
  engine::Engine& peer_;
};

}  // namespace kvfleet::testing
