// The one place kvfleet opens a client channel to a kvfleet service, so
// credentials (TLS/mTLS, next) and keepalive are set once for every caller:
// workers calling the cachemanager, routers calling workers, the CLI, the
// load tool and the tests.
//
//   auto stub = v1::CacheManager::NewStub(CreateClientChannel("10.0.0.5:50050"));
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace kvfleet::transport {

struct ClientChannelOptions {
  // A connection of its own, not shared with other channels to the same
  // address (gRPC shares them process-wide), so one can be broken or
  // closed without touching the others: tests, and load tools that want
  // one connection per client.
  bool own_connection = false;
};

// Keepalive pings find a dead peer behind a silent connection within seconds.
std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& address,
                                                   const ClientChannelOptions& options = {});

}  // namespace kvfleet::transport
