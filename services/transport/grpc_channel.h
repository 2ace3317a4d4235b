// The one place kvfleet's services open a client channel to another
// service, so credentials (TLS/mTLS) and keepalive are set once for every
// caller: workers calling the cachemanager, routers calling workers.
//
//   auto stub = v1::CacheManager::NewStub(CreateClientChannel("10.0.0.5:50050"));
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace kvfleet::transport {

// Keepalive pings find a dead peer behind a silent connection within seconds.
std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& address);

}  // namespace kvfleet::transport
