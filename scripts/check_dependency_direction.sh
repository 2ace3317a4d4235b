#!/usr/bin/env bash
# Fails if transport code leaks into transport-free libraries (docs/design.md,
# "Layers and the dependency rule"): no gRPC or generated proto headers in
# common/, model/, kernels/, or the services' engine, index and placement;
# and if a gRPC channel or server is built anywhere but services/transport/.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
dirs=(common model kernels engine)
for d in services/*/index services/*/placement services/*/frontend; do [[ -d $d ]] && dirs+=("$d"); done
leaks=$(grep -rlE '#include [<"](grpcpp/|grpc/|.*\.pb\.h|.*\.grpc\.pb\.h)' "${dirs[@]}" 2>/dev/null)
if [[ -n $leaks ]]; then
  echo "gRPC or generated proto headers in transport-free code:"
  echo "$leaks"
  exit 1
fi
echo "dependency direction: no transport headers in ${dirs[*]}"

# One place builds client channels and one builds servers
# (services/transport/), so credentials are never forgotten on a hop. Tests'
# in-process fakes may build their own servers.
channels=$(grep -rlE 'grpc::(CreateChannel|CreateCustomChannel)\(' --include='*.cc' --include='*.h' \
  common model kernels services tools bench tests 2>/dev/null | grep -v '^services/transport/grpc_channel.cc$')
servers=$(grep -rlE 'grpc::ServerBuilder\b' --include='*.cc' --include='*.h' common model kernels services tools bench \
  2>/dev/null | grep -v '^services/transport/grpc_server.cc$')
if [[ -n $channels || -n $servers ]]; then
  [[ -n $channels ]] && { echo "client channels built outside services/transport/grpc_channel.cc (use CreateClientChannel):"; echo "$channels"; }
  [[ -n $servers ]] && { echo "servers built outside services/transport/grpc_server.cc (use StartGrpcServer):"; echo "$servers"; }
  exit 1
fi
echo "transport: channels only from CreateClientChannel, servers only from StartGrpcServer"
