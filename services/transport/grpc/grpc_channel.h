// The one place kvfleet opens a client channel to a kvfleet service, so
// credentials (TLS/mTLS, next) and keepalive are set once for every caller:
// workers calling the cachemanager, routers calling workers, the CLI, the
// load tool and the tests.
//
//   auto stub = v1::CacheManager::NewStub(CreateClientChannel("10.0.0.5:50050"));
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "services/transport/transport_options.h"

namespace kvfleet::transport {

struct ClientChannelOptions {
  // A connection of its own, not shared with other channels to the same
  // address (gRPC shares them process-wide), so one can be broken or
  // closed without touching the others: tests, and load tools that want
  // one connection per client.
  bool own_connection = false;
  // TLS when tls.ca is set: the server's certificate must chain to it and
  // name the address's host (or server_name); with tls.cert and tls.key this
  // client presents them (mutual TLS). client_ca is not used here.
  TlsFiles tls;
  std::string server_name;     // checked against the server's certificate instead of the address's host
  std::string internal_token;  // sent on every call when set (internal_token.h)
};

// How a service calls its peers: their certificates checked against its
// --tls-ca, its own --tls-cert and --tls-key presented (mutual TLS); plaintext
// when it has no --tls-ca, with its --internal-token-file's token if any.
inline ClientChannelOptions PeerChannelOptions(const TransportOptions& own) {
  return {.tls = {.cert = own.tls.cert, .key = own.tls.key, .ca = own.tls.ca}, .internal_token = own.internal_token};
}

// Keepalive pings find a dead peer behind a silent connection within seconds.
std::shared_ptr<grpc::Channel> CreateClientChannel(const std::string& address,
                                                   const ClientChannelOptions& options = {});

}  // namespace kvfleet::transport
